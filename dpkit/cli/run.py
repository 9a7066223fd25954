"""``dpkit run SPEC``: run a spec's cells (resuming), print the table, write outputs."""

from __future__ import annotations

import sys


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
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from dpkit.report import render_table
    from dpkit.runner import run_spec
    from dpkit.spec import load_spec, parse_spec, read_yaml

    if args.retries < 0:
        print(f"error: --retries must be ≥ 0, got {args.retries}", file=sys.stderr)
        return 2
    if args.device:
        raw = read_yaml(args.spec)
        raw["device"] = args.device
        spec = parse_spec(raw, args.spec)
    else:
        spec = load_spec(args.spec)
    outcome = run_spec(spec, args.out, fresh=args.fresh, executor=args.executor,
                       retries=args.retries, address=args.address,
                       show_progress=not args.no_progress)
    print(render_table(spec, outcome.rows))
    print(f"\n{len(outcome.rows)} cells finished ({outcome.ran} run now, {outcome.skipped} "
          f"resumed from earlier runs), {len(outcome.failures)} failed; outputs in "
          f"{outcome.out_dir}/ (results.jsonl, results.csv, ledger.json, tradeoff.png)")
    if outcome.interrupted:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 130
    return 1 if outcome.failures else 0
