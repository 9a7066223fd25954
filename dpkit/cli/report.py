"""``dpkit report RUN_DIR [RUN_DIR ...]``: re-render table, CSVs, plot and claims from results.

Reads each folder's ``results.jsonl`` and ``spec.json`` (written by every run); runs nothing.
Several folders of one spec (say, seeds run on different machines) merge into one report; folders
of different specs are refused with the fields that differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from dpkit.base.errors import DpkitError
from dpkit.base.results import CellResult
from dpkit.base.jsonutil import restore_floats
from dpkit.cli.run import written_files

if TYPE_CHECKING:  # the spec machinery is imported when a report is made, not when dpkit starts
    from dpkit.spec import Spec

# fields that may differ between runs of one spec: where and how they ran, and which seeds
RUN_ONLY = ("seeds", "output", "device", "resources")


def register(sub) -> None:
    """Add the ``report`` sub-command."""
    p = sub.add_parser("report", help="re-render a run's table, CSVs, plot and claims",
                       description="Re-render the table, results.csv, cells.csv, tradeoff.png "
                       "and claims.json from results.jsonl without running a cell. Several "
                       "folders of the same spec merge (cells by key, seeds pooled).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run output folders")
    p.add_argument("--out", help="where to write (default: the folder itself; with several "
                   "folders, runs/<name>-merged)")
    p.add_argument("--wide", action="store_true",
                   help="every metric and privacy number in the table (default: the headline)")
    p.add_argument("--spec", help="spec file, for folders written before spec.json existed")
    p.set_defaults(func=_report)


def load_run(folder: Path, spec_path: str | None = None) -> tuple[Spec, list[CellResult]]:
    """(spec, rows) of one run folder."""
    from dpkit.runner.store import ResultStore
    from dpkit.spec import Spec, load_spec

    if not (folder / "results.jsonl").is_file():
        raise DpkitError(f"{folder}: no results.jsonl; give a folder that `dpkit run` wrote to")
    if spec_path:
        from dpkit.contract.plugins import get_registry

        spec = load_spec(spec_path, registry=get_registry())
    elif (folder / "spec.json").is_file():
        spec = Spec.model_validate(restore_floats(json.loads(
            (folder / "spec.json").read_text(encoding="utf-8"))))
    else:
        raise DpkitError(f"{folder}: no spec.json (written by runs since claims were added); "
                         "pass the spec with --spec SPEC.yaml")
    rows = list(ResultStore(folder).rows.values())
    if not rows:
        raise DpkitError(f"{folder}: results.jsonl holds no finished cell")
    return spec, rows


def merge_runs(runs: list[tuple[Path, Spec, list[CellResult]]]) -> tuple[Spec, list[CellResult]]:
    """One (spec, rows) from several runs of the same spec; seeds pooled, cells unique by key."""
    first_dir, spec, _ = runs[0]
    base = _comparable(spec)
    for folder, other, _ in runs[1:]:
        differ = sorted(k for k in {*base, *_comparable(other)}
                        if base.get(k) != _comparable(other).get(k))
        if differ:
            raise DpkitError(f"{folder} and {first_dir} are runs of different specs (they differ "
                             f"in {', '.join(differ)}); merge only folders of one spec")
    rows: dict[str, CellResult] = {}
    for _, _, run_rows in runs:
        for r in run_rows:
            rows.setdefault(r.key, r)
    seeds = sorted({s for _, sp, _ in runs for s in sp.seeds} | {r.seed for r in rows.values()})
    return spec.model_copy(update={"seeds": seeds}), list(rows.values())


def _comparable(spec: Spec) -> dict:
    return {k: v for k, v in spec.model_dump(mode="json").items() if k not in RUN_ONLY}


def _registry():
    """The installed plug-ins' registry, or None where they do not load (a report still renders)."""
    from dpkit.contract.plugins import get_registry

    try:
        return get_registry()
    except Exception:  # noqa: BLE001 - a report renders even where the plug-ins do not load
        return None


def _relabel_cells(spec, registry):
    """The spec's cells when its plug-ins load (for current labels); none otherwise."""
    if registry is None:
        return []
    try:
        from dpkit.spec.cells import expand

        return expand(spec, registry)
    except DpkitError:
        return []


def _report(args) -> int:
    from dpkit.report import render_table, write_outputs
    from dpkit.report.reference import read_reference

    folders = [Path(r) for r in args.runs]
    runs = [(f, *load_run(f, args.spec)) for f in folders]
    spec, rows = merge_runs(runs) if len(runs) > 1 else runs[0][1:]
    out = Path(args.out) if args.out else (
        folders[0] if len(folders) == 1 else Path("runs") / f"{spec.name}-merged")
    if len(folders) > 1 or out != folders[0]:
        _write_rows(rows, out)
    registry = _registry()
    reference = merge_references([read_reference(f) for f in folders])
    # datasets as the run recorded them (reference.json): a report loads none
    write_outputs(spec, _relabel_cells(spec, registry), rows, out, registry, reference,
                  fingerprint=False)
    print(render_table(spec, rows, wide=args.wide, registry=registry, reference=reference,
                       fingerprint=False))
    print(f"\n{len(rows)} cells from {len(folders)} folder(s), seeds {spec.seeds}; "
          f"{written_files(out)}")
    return 0


def merge_references(references: list[dict | None]) -> dict | None:
    """One reference from the folders' own (spaces and label counts of all of them); None when no
    folder has one (written before reference.json existed)."""
    kept = [r for r in references if r]
    if not kept:
        return None
    labels = {json.dumps(entry, sort_keys=True): entry for r in kept for entry in r.get("labels", [])}
    return {**kept[0], "spaces": {k: v for r in kept for k, v in r.get("spaces", {}).items()},
            "labels": list(labels.values()),
            "datasets": {k: v for r in kept for k, v in r.get("datasets", {}).items()}}


def _write_rows(rows: list[CellResult], out: Path) -> None:
    """The merged results.jsonl, so the merged folder is itself a run folder."""
    from dpkit.runner.store import ResultStore

    if (out / "results.jsonl").exists():
        raise DpkitError(f"{out}/results.jsonl exists; choose another --out or remove it")
    store = ResultStore(out)
    for r in rows:
        store.append(r)
