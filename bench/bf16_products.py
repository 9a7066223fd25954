"""bfloat16 autocast on this CPU: torch's own bf16 products against dpkit's rounded ones.

Run: ``python -m bench.bf16_products [--layers 2] [--batch 8] [--seq 64] [--rounds 3]``.

Times a forward and backward pass of a MiniLM-sized BERT (hidden 384, 12 heads, intermediate
1536; random weights) in fp32, under ``torch.autocast(cpu, bfloat16)`` (torch's products) and
under :func:`dpkit.bf16_autocast` with rounded products (fp32 products of bf16-rounded operands),
best of ``--rounds``. Prints the ratios torch-bf16 / rounded and rounded / fp32, how far each
output is from torch's bf16 one, whether the CPU reports native bf16, torch's thread count and the
load average; writes ``bench/results/bf16_products.json``. On a CPU with native bf16 the rounded
products are not what ``bf16_autocast`` chooses, and the first ratio says what that choice saves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from pathlib import Path

import torch

from dpkit.ml.precision import bf16_autocast, cpu_has_native_bf16


def minilm_sized(layers: int) -> torch.nn.Module:
    """A BERT of MiniLM's width with ``layers`` blocks and random weights."""
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    return BertModel(BertConfig(hidden_size=384, num_hidden_layers=layers,
                                num_attention_heads=12, intermediate_size=1536,
                                vocab_size=1000)).eval()


def timed_pass(model, x, mask, precision: str, rounds: int) -> tuple[float, torch.Tensor]:
    """Best wall seconds of a forward and backward pass at ``precision``, and its output."""
    best, out = float("inf"), None
    for _ in range(rounds):
        ctx = {"fp32": contextlib.nullcontext(),
               "torch-bf16": torch.autocast("cpu", dtype=torch.bfloat16),
               "rounded": bf16_autocast("cpu", rounded=True)}[precision]
        start = time.perf_counter()
        with ctx:
            out = model(inputs_embeds=x, attention_mask=mask).last_hidden_state.float()
        out.sum().backward()
        best = min(best, time.perf_counter() - start)
    return best, out.detach()


def main() -> None:
    """Time the three precisions and print their ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = minilm_sized(args.layers)
    x = torch.randn(args.batch, args.seq, 384)
    mask = torch.ones(args.batch, args.seq, dtype=torch.long)
    runs = {p: timed_pass(model, x, mask, p, args.rounds) for p in ("fp32", "rounded", "torch-bf16")}
    reference = runs["torch-bf16"][1]

    def distance(out: torch.Tensor) -> float:
        return float((out - reference).norm() / reference.norm())

    result = {
        "seconds": {p: t for p, (t, _) in runs.items()},
        "torch_bf16_over_rounded": runs["torch-bf16"][0] / runs["rounded"][0],
        "rounded_over_fp32": runs["rounded"][0] / runs["fp32"][0],
        "relative_distance_to_torch_bf16": {p: distance(o) for p, (_, o) in runs.items()
                                            if p != "torch-bf16"},
        "native_bf16": cpu_has_native_bf16(), "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(), "shape": vars(args)}
    for key in ("seconds", "torch_bf16_over_rounded", "rounded_over_fp32",
                "relative_distance_to_torch_bf16", "native_bf16", "threads", "load_average"):
        print(f"{key}: {result[key]}")
    out = Path(__file__).resolve().parent / "results" / "bf16_products.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
