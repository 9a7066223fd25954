"""``dpkit validate SPEC...``: check specs without running anything."""

from __future__ import annotations

import sys


def register(sub) -> None:
    """Add the ``validate`` sub-command."""
    p = sub.add_parser("validate", help="check specs without running them")
    p.add_argument("specs", nargs="+", help="spec files")
    p.set_defaults(func=_validate)


def _validate(args) -> int:
    from dpkit.errors import SpecError
    from dpkit.plugins import get_registry
    from dpkit.runner.cells import expand
    from dpkit.spec import load_spec

    status = 0
    for path in args.specs:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            print(str(exc), file=sys.stderr)
            status = 2
            continue
        n = len(expand(spec, get_registry()))
        print(f"{path}: ok ({len(spec.methods())} methods, {n} cells)")
    return status
