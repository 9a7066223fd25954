"""``dpkit validate SPEC...``: check specs without running anything."""

from __future__ import annotations

import sys


def register(sub) -> None:
    """Add the ``validate`` sub-command."""
    p = sub.add_parser("validate", help="check specs without running them",
                       description="Check each spec and every cell its sweeps expand to against "
                       "the installed plug-ins; nothing runs. Exit 2 if any spec is invalid.")
    p.add_argument("specs", nargs="+", help="spec files")
    p.set_defaults(func=_validate)


def _validate(args) -> int:
    from dpkit.base.errors import SpecError
    from dpkit.contract.plugins import get_registry
    from dpkit.spec import check_spec, parse_structure, read_yaml

    registry = get_registry()
    status = 0
    for path in args.specs:
        try:
            spec = parse_structure(read_yaml(path), path)
            cells = check_spec(spec, registry)
        except SpecError as exc:
            print(str(exc), file=sys.stderr)
            status = 2
            continue
        print(f"{path}: ok ({len(spec.methods())} methods, {len(cells)} cells)")
    return status
