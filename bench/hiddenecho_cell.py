"""One HiddenEcho cell of ``specs/hiddenecho.yaml``: frozen blocks replayed or not, fp32 or bf16.

Run: ``python -m bench.hiddenecho_cell [--epochs 4] [--train-examples N] [--test-examples N]``.
Runs, at η = 60 and seed 0, with a fixed number of epochs (no early stopping, so all runs do
the same work), each cell with its server in its own process as ``dpkit run`` does (the
frozen-block store belongs to that server: it starts empty in every cell):

1. the HiddenEcho cell with ``reuse_frozen: false`` (the 4 frozen blocks run every epoch);
2. the same cell with ``reuse_frozen: true`` (computed in epoch 1, replayed after);
3. run 2 with ``precision: bf16`` (the server's blocks under bfloat16 autocast).

Prints wall seconds, the client's CPU seconds and the server's training CPU seconds of each, the
ratios 1 / 2 and 2 / 3, torch's thread count, whether the CPU reports bf16 instructions, the load
average, how far the replayed run's AUC and training losses are from the computed one's, how far
the bf16 run's are from the fp32 one's (these differ by rounding, which changes the training
trajectory), and whether the bf16 run sent the same bytes; writes JSON to
``bench/results/hiddenecho_cell.json``. Time it on a quiet machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

from dpkit.base.results import CellResult
from dpkit.contract.plugins import get_registry


def spec_cell(label: str, overrides: dict):
    """The spec's cell of method ``label`` at η = 60, seed 0, with ``overrides`` in params."""
    from dpkit.contract.plugins import get_registry
    from dpkit.spec import load_spec
    from dpkit.spec.cells import expand

    spec = load_spec("specs/hiddenecho.yaml", registry=get_registry())
    (cell,) = [c for c in expand(spec, get_registry())
               if c.method == label and c.seed == 0 and c.params.get("eta") == 60]
    return dataclasses.replace(cell, params={**cell.params, **overrides})


def timed_cell(cell) -> tuple[CellResult, float, float]:
    """The result row, wall seconds and the client's CPU seconds of one executed cell."""
    from dpkit.runner.execute import execute_cell

    start, start_cpu = time.perf_counter(), time.process_time()
    row = execute_cell(cell, get_registry())
    return row, time.perf_counter() - start, time.process_time() - start_cpu


def server_cpu(row: CellResult) -> float:
    """CPU seconds the cell's server spent in its training epochs (0 when it ran in-process)."""
    m = row.metrics
    return m.get("epoch_server_cpu_seconds", 0.0) * m.get("steps_trained", 0.0)


def main() -> None:
    """Time the three cells; print and save the numbers."""
    from bench.obfuslm_finetune import cpu_has_bf16

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--train-examples", type=int, default=None, help="default: the spec's")
    ap.add_argument("--test-examples", type=int, default=None, help="default: the spec's")
    ap.add_argument("--out", default="bench/results/hiddenecho_cell.json")
    args = ap.parse_args()
    fixed = {"epochs": args.epochs, "patience": None, "precision": "fp32"}  # the spec says bf16
    fixed.update({k: v for k, v in (("train_examples", args.train_examples),
                                    ("test_examples", args.test_examples)) if v is not None})
    timed_cell(spec_cell("LDP", {**fixed, "epochs": 1}))  # loads the model, tokenizes
    computed, computed_wall, computed_cpu = timed_cell(
        spec_cell("HiddenEcho", {**fixed, "reuse_frozen": False}))
    replayed, replayed_wall, replayed_cpu = timed_cell(spec_cell("HiddenEcho", fixed))
    half, half_wall, half_cpu = timed_cell(spec_cell("HiddenEcho", {**fixed, "precision": "bf16"}))
    losses = zip(computed.training_curves[0]["train_loss"],
                 replayed.training_curves[0]["train_loss"])
    half_losses = zip(replayed.training_curves[0]["train_loss"],
                      half.training_curves[0]["train_loss"])
    result = {
        "threads": torch.get_num_threads(), "cpu_bf16": cpu_has_bf16(),
        "load_average": os.getloadavg(), "fixed": fixed,
        "computed_wall_s": round(computed_wall, 1), "computed_cpu_s": round(computed_cpu, 1),
        "computed_server_training_cpu_s": round(server_cpu(computed), 1),
        "replayed_wall_s": round(replayed_wall, 1), "replayed_cpu_s": round(replayed_cpu, 1),
        "replayed_server_training_cpu_s": round(server_cpu(replayed), 1),
        "computed_over_replayed_wall": round(computed_wall / replayed_wall, 3),
        "auc_difference": abs(computed.metrics["auc"] - replayed.metrics["auc"]),
        "max_train_loss_difference": max(abs(a - b) for a, b in losses),
        "bf16_wall_s": round(half_wall, 1), "bf16_cpu_s": round(half_cpu, 1),
        "bf16_server_training_cpu_s": round(server_cpu(half), 1),
        "replayed_over_bf16_wall": round(replayed_wall / half_wall, 3),
        "bf16_auc_difference": abs(replayed.metrics["auc"] - half.metrics["auc"]),
        "bf16_max_train_loss_difference": max(abs(a - b) for a, b in half_losses),
        "bf16_same_bytes": half.wire_bytes == replayed.wire_bytes,
    }
    for key, value in result.items():
        print(f"{key:>32}: {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
