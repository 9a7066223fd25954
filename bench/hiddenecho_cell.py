"""One HiddenEcho cell of ``specs/hiddenecho.yaml`` with and without the cross-cell caches.

Run: ``python -m bench.hiddenecho_cell [--train-examples N] [--test-examples N] [--epochs E]``.
Runs the HiddenEcho cell at η = 60, seed 0, then its −Res ablation twice: once after
forgetting every in-process cache (cold: tokenizing and the integrated-gradient layer filter run
again) and once with them warm (what a spec run gets, since −Res scores the same noisy samples on
the same model body as HiddenEcho). Prints wall and CPU seconds, torch's thread count, the load
average, the cold / warm ratio, and whether the two −Res runs gave identical metrics (timings
aside); writes JSON to ``bench/results/hiddenecho_cell.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

TIMING = ("epoch_seconds", "epoch_cpu_seconds")


def spec_cells(label: str, overrides: dict) -> list:
    """The spec's cells of method ``label`` at η = 60, seed 0, with ``overrides`` in params."""
    from dpkit.plugins import get_registry
    from dpkit.spec import load_spec
    from dpkit.spec.cells import expand

    spec = load_spec("specs/hiddenecho.yaml")
    cells = [c for c in expand(spec, get_registry())
             if c.method == label and c.seed == 0 and c.params.get("eta") == 60]
    return [dataclasses.replace(c, params={**c.params, **overrides}) for c in cells]


def timed_cell(cell) -> tuple[dict, float, float]:
    """Metrics, wall seconds and CPU seconds of one executed cell."""
    from dpkit.runner.execute import execute_cell

    start, start_cpu = time.perf_counter(), time.process_time()
    row = execute_cell(cell)
    return row["metrics"], time.perf_counter() - start, time.process_time() - start_cpu


def main() -> None:
    """Time the cold and warm −Res cell; print and save the numbers."""
    from dpkit.cache import clear_memo

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train-examples", type=int, default=None, help="default: the spec's")
    ap.add_argument("--test-examples", type=int, default=None, help="default: the spec's")
    ap.add_argument("--epochs", type=int, default=None, help="default: the spec's")
    ap.add_argument("--out", default="bench/results/hiddenecho_cell.json")
    args = ap.parse_args()
    overrides = {k: v for k, v in (("train_examples", args.train_examples),
                                   ("test_examples", args.test_examples),
                                   ("epochs", args.epochs)) if v is not None}
    (he,) = spec_cells("HiddenEcho", overrides)
    (ablation,) = spec_cells("HiddenEcho -Res", overrides)
    _, he_wall, _ = timed_cell(he)
    warm, warm_wall, warm_cpu = timed_cell(ablation)
    clear_memo()
    cold, cold_wall, cold_cpu = timed_cell(ablation)
    same = all(cold[k] == warm[k] for k in cold if k not in TIMING)
    result = {
        "threads": torch.get_num_threads(), "load_average": os.getloadavg(),
        "overrides": overrides, "hiddenecho_wall_s": round(he_wall, 1),
        "res_cold_wall_s": round(cold_wall, 1), "res_cold_cpu_s": round(cold_cpu, 1),
        "res_warm_wall_s": round(warm_wall, 1), "res_warm_cpu_s": round(warm_cpu, 1),
        "cold_over_warm_wall": round(cold_wall / warm_wall, 3),
        "cold_over_warm_cpu": round(cold_cpu / warm_cpu, 3), "identical_metrics": same,
    }
    for key, value in result.items():
        print(f"{key:>20}: {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
