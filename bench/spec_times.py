"""Wall and CPU time of whole spec runs, and where a run folder's time went.

Run: ``python -m bench.spec_times specs/quick.yaml [specs/obfuslm.yaml …] [--seeds N]`` runs each
spec with ``dpkit run --fresh`` into a scratch folder and prints, per spec: wall seconds, CPU
seconds of the run (user + system of the child process), the load average before and after,
the number of cells and seconds per cell. ``--folders RUN_DIR …`` instead reads finished run
folders (``results.jsonl``) and prints the summed cell time per method, so two runs of one spec
(before and after a change) can be compared: the last column is each method's time relative to
the first folder given. Results go to ``bench/results/spec_times.json``.

Time a spec on a quiet machine: other processes on the same cores inflate the wall time (the
load average printed beside it says how quiet it was).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def time_spec(spec: str, seeds: int | None) -> dict:
    """Run ``spec`` from scratch and measure it."""
    out = Path(tempfile.mkdtemp(prefix="dpkit-spec-times-"))
    cmd = [sys.executable, "-m", "dpkit", "run", spec, "--out", str(out), "--fresh",
           "--no-progress", *(["--seeds", str(seeds)] if seeds else [])]
    before_load, before = os.getloadavg(), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cells = sum(1 for _ in (out / "results.jsonl").open())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"spec": spec, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cells": cells,
            "s_per_cell": round(wall / max(cells, 1), 1), "load_before": before_load[0],
            "load_after": os.getloadavg()[0], "out": str(out)}


def folder_times(folder: str) -> dict[str, float]:
    """Summed ``elapsed_s`` of a run folder's cells, per method."""
    per_method: dict[str, float] = defaultdict(float)
    for line in (Path(folder) / "results.jsonl").open():
        row = json.loads(line)
        per_method[row["method"]] += float(row.get("elapsed_s", 0.0))
    return dict(per_method)


def main(argv: list[str] | None = None) -> None:
    """Time the specs given, or compare finished run folders."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", help="spec files to run and time")
    parser.add_argument("--seeds", type=int, default=None, help="override the spec's seeds")
    parser.add_argument("--folders", nargs="+", help="finished run folders to compare instead")
    args = parser.parse_args(argv)
    if args.folders:
        tables = {f: folder_times(f) for f in args.folders}
        base = tables[args.folders[0]]
        for folder, per_method in tables.items():
            print(f"{folder}: {sum(per_method.values()):.0f} s of cells")
            for method, seconds in sorted(per_method.items()):
                ratio = seconds / base[method] if base.get(method) else float("nan")
                print(f"  {method:<28} {seconds:8.0f} s   ×{ratio:.2f} vs first")
        results: object = tables
    else:
        if not args.specs:
            parser.error("give spec files to time, or --folders RUN_DIR …")
        results = [time_spec(s, args.seeds) for s in args.specs]
        for r in results:
            print(f"{r['spec']}: {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU, {r['cells']} cells "
                  f"({r['s_per_cell']:.0f} s each), load {r['load_before']:.2f} → {r['load_after']:.2f}")
    target = Path("bench/results/spec_times.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
