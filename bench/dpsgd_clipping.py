"""DP-SGD for DPED's skip-gram: sparse per-sample clipping vs Opacus' materialized per-sample gradients.

Run ``python -m bench.dpsgd_clipping`` (``--quick`` for fewer steps). Trains the same DP-SGD
skip-gram (DPED spec sizes: vocabulary 3,000, 100-d, 32 pairs and 5 negatives per document,
≈ 56 documents per Poisson batch) with both clipping paths on one CPU thread and prints seconds
per step and the speed-up ratio. Writes ``bench/results/dpsgd_clipping.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from dpkit_dped.dpsgd import train_dpsgd_documents

RESULTS = Path(__file__).resolve().parent / "results" / "dpsgd_clipping.json"


def seconds_per_step(clipping: str, steps: int, *, docs: int, vocab: int, dim: int,
                     pairs: int, rate: float) -> float:
    """Wall seconds per DP-SGD step of ``train_dpsgd_documents`` with the given clipping path."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (docs, 300), generator=gen)
    probs = torch.arange(vocab, 0, -1, dtype=torch.float32) ** 0.75
    started = time.perf_counter()
    train_dpsgd_documents(tokens, torch.full((docs,), 300), probs / probs.sum(), pairs_per_doc=pairs,
                window=5, dim=dim, negatives=5, noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=rate,
                steps=steps, lr=0.005, generator=gen, clipping=clipping, curve_points=1)
    return (time.perf_counter() - started) / steps


def main() -> None:
    """Time both paths and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 steps instead of 40")
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 10 if args.quick else 40
    sizes = {"docs": 11_000, "vocab": 3000, "dim": 100, "pairs": 32, "rate": 0.005}
    for clipping in ("sparse", "opacus"):  # warm-up: first-call imports and allocations
        seconds_per_step(clipping, 2, **sizes)
    sparse = seconds_per_step("sparse", steps, **sizes)
    opacus = seconds_per_step("opacus", steps, **sizes)
    out = {"sizes": sizes, "steps": steps, "sparse_s_per_step": sparse,
           "opacus_s_per_step": opacus, "speedup": opacus / sparse}
    print(f"DP-SGD skip-gram, V={sizes['vocab']}, d={sizes['dim']}, "
          f"≈{round(sizes['rate'] * sizes['docs'])} documents/batch, {steps} steps, 1 thread")
    print(f"  Opacus per-sample gradients: {opacus * 1000:8.1f} ms/step")
    print(f"  sparse per-sample rows:      {sparse * 1000:8.1f} ms/step")
    print(f"  speed-up (Opacus / sparse):  {opacus / sparse:8.1f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
