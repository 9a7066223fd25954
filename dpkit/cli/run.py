"""``dpkit run SPEC``: run a spec's cells (resuming), print the table, write outputs."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


def register(sub) -> None:
    """Add the ``run`` sub-command."""
    p = sub.add_parser("run", help="run a spec (resumes finished cells)",
                       description="Run every cell of a spec. Finished cells are kept in "
                       "OUT/results.jsonl; rerunning the same command resumes.")
    p.add_argument("spec", help="path to the YAML spec")
    p.add_argument("--out", help="output folder (default: the spec's output or runs/<name>)")
    p.add_argument("--fresh", action="store_true", help="discard finished cells and redo all")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where cells run (ray: pip install 'dpkit[ray]')")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--retries", type=int, default=0, help="extra attempts for a failing cell")
    p.add_argument("--device", help="override the spec's device (auto, cpu, cuda)")
    p.add_argument("--seeds", type=int, metavar="N",
                   help="run seeds 0..N-1 instead of the spec's (and its methods')")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--wide", action="store_true",
                   help="every metric and privacy number in the table (default: the headline)")
    p.set_defaults(func=_run)


def written_files(out) -> str:
    """``outputs in OUT/ (…)`` naming only the files that exist, or that there are none."""
    from dpkit.runner.store import WRITTEN_FILES

    present = [name for name in WRITTEN_FILES if (out / name).is_file()]
    return f"outputs in {out}/ ({', '.join(present)})" if present else f"nothing written to {out}/"


def declared_output(spec_path: Path, _seen: tuple[Path, ...] = ()) -> Path | None:
    """The output folder a spec file declares (``output``, else ``runs/<name>``, through its
    ``include:`` files, ``null`` removing an included value), read with YAML alone — so ``dpkit
    run`` can lock the folder before it imports the spec machinery, the plug-ins or torch. None
    where the file cannot be read that simply (the full reader then reports why)."""
    keys = _root_keys(Path(spec_path), _seen)
    if keys is None or not isinstance(keys.get("output", keys.get("name")), str):
        return None
    return Path(keys["output"]) if keys.get("output") else Path("runs") / keys["name"]


def _root_keys(path: Path, seen: tuple[Path, ...]) -> dict | None:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    includes = raw.get("include", []) if isinstance(raw, dict) else None
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list):
        return None
    merged: dict = {}
    for inc in includes:
        target = (path.parent / str(inc)).resolve()
        below = None if target in seen or target == path.resolve() else \
            _root_keys(target, seen + (path.resolve(),))
        if below is None:
            return None
        merged = _over(merged, below)
    return _over(merged, {k: raw[k] for k in ("name", "output") if k in raw})


def _over(base: dict, override: dict) -> dict:
    """:func:`dpkit.spec.loader.deep_merge` for scalar keys: null removes a value it finds, and
    is kept where there is none (a later merge then removes with it)."""
    out = dict(base)
    for key, value in override.items():
        if value is None and key in out:
            del out[key]
        else:
            out[key] = value
    return out


def _start_fork_server_early(executor: str, spec: str) -> None:
    """Local runs with server processes start the fork server now, with the plug-ins' and the
    spec's server modules, so that its imports overlap this process's own
    (:func:`dpkit.boundary.fork_server.start_early`)."""
    from dpkit.boundary.fork_server import channel_kind, start_early
    from dpkit.contract.plugins import plugin_modules
    from dpkit.runner.preload import SPEC_VARIABLE  # light: neither torch nor the runner

    try:
        wanted = executor == "local" and channel_kind() == "process"
    except ValueError:  # a wrong $DPKIT_SERVER: the runner says so
        return
    if wanted:
        start_early([*plugin_modules(), "dpkit.runner.preload"],
                    {SPEC_VARIABLE: str(Path(spec).resolve())})


def _run(args) -> int:
    if args.retries < 0:
        print(f"error: --retries must be ≥ 0, got {args.retries}", file=sys.stderr)
        return 2
    if args.seeds is not None and args.seeds < 1:
        print(f"error: --seeds must be ≥ 1, got {args.seeds}", file=sys.stderr)
        return 2
    from dpkit.runner.lock import OutputLock  # light: a busy folder is refused before the rest

    early = Path(args.out) if args.out else declared_output(Path(args.spec))
    with OutputLock(early) if early is not None else contextlib.nullcontext() as held:
        return _run_locked(args, held)


def _run_locked(args, held) -> int:
    _start_fork_server_early(args.executor, args.spec)
    from dpkit.contract.plugins import get_registry
    from dpkit.report import render_table
    from dpkit.runner import run_spec
    from dpkit.spec import parse_structure, read_yaml

    raw = read_yaml(args.spec)
    if args.device:
        raw["device"] = args.device
    if args.seeds:
        raw["seeds"] = list(range(args.seeds))
        for entry in [raw.get("defense"), raw.get("mechanism"), *(raw.get("baselines") or [])]:
            if isinstance(entry, dict):
                entry.pop("seeds", None)  # --seeds N applies to every method
    # structure only: the plug-ins are loaded under the lock, and run_spec checks every cell
    spec = parse_structure(raw, str(args.spec))
    registry = get_registry()
    if spec.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"error: {args.spec} asks for device {spec.device!r} but this machine has no "
                  "CUDA GPU; run it on a GPU machine, or pass --device cpu to run it here "
                  "(slowly)", file=sys.stderr)
            return 2
    outcome = run_spec(spec, args.out, fresh=args.fresh, executor=args.executor,
                       retries=args.retries, address=args.address,
                       show_progress=not args.no_progress, held=held, registry=registry)
    print(render_table(spec, outcome.rows, wide=args.wide, registry=registry,
                       reference=outcome.reference))
    if outcome.budget_store and outcome.ran:
        print(f"\nprivacy spends of the {outcome.ran} cells run now recorded in the budget store "
              f"{outcome.budget_store} (`dpkit budget status` lists them; DPKIT_BUDGET_STORE=off "
              "stops recording)")
    print(f"\n{len(outcome.rows)} cells finished ({outcome.ran} run now, {outcome.skipped} "
          f"resumed from earlier runs), {len(outcome.failures)} failed; "
          f"{written_files(outcome.out_dir)}")
    if outcome.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    return 1 if outcome.failures else 0
