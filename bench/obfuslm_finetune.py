"""ObfusLM's server fine-tuning step on MiniLM: fp32, fused AdamW, bfloat16 autocast.

Run: ``python -m bench.obfuslm_finetune [--steps 8] [--batch 32] [--length 40]``.
Times one training step (forward, backward, AdamW) of the registered ``minilm`` encoder with
ObfusLM's classification head, as ``dpkit_obfuslm.classify.fine_tune`` runs it, in three set-ups:
fp32 with the default (per-tensor) AdamW, fp32 with fused AdamW (what ``fine_tune`` uses), and
fused AdamW with the body under bfloat16 autocast (``precision: bf16``). Prints seconds per step,
the speed-up of each over the first, torch's thread count, whether the CPU reports bf16
instructions, and the load average; writes JSON to ``bench/results/obfuslm_finetune.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path

import torch


def cpu_has_bf16() -> bool:
    """Whether /proc/cpuinfo lists AVX-512 BF16 or AMX (fast bfloat16 matrix products)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def step_seconds(classifier, fused: bool, steps: int, ids, mask, labels) -> float:
    """Mean wall seconds of one fine-tuning step (after one warm-up step)."""
    opt = torch.optim.AdamW(classifier.parameters(), lr=5e-5, fused=fused)
    classifier.train()

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(classifier(ids, mask), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main() -> None:
    """Time the three set-ups on the real MiniLM; print and save the numbers."""
    from dpkit.contract.plugins import get_registry
    from dpkit_obfuslm.classify import EncoderClassifier

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--out", default="bench/results/obfuslm_finetune.json")
    args = ap.parse_args()
    model = get_registry().build("model", "minilm", {}).load(torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, model.vocab_size, (args.batch, args.length), generator=gen)
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 2, (args.batch,), generator=gen)
    seconds = {}
    for name, fused, precision in (("fp32", False, "fp32"), ("fp32_fused", True, "fp32"),
                                   ("bf16_fused", True, "bf16")):
        torch.manual_seed(0)
        body = copy.deepcopy(model.server)
        classifier = EncoderClassifier(body, model.hidden_size, 2, precision)
        seconds[name] = step_seconds(classifier, fused, args.steps, ids, mask, labels)
    result = {"threads": torch.get_num_threads(), "cpu_bf16": cpu_has_bf16(),
              "load_average": os.getloadavg(), "batch": args.batch, "length": args.length,
              **{f"{k}_s_per_step": round(v, 4) for k, v in seconds.items()},
              "fused_speedup": round(seconds["fp32"] / seconds["fp32_fused"], 3),
              "bf16_fused_speedup": round(seconds["fp32"] / seconds["bf16_fused"], 3)}
    for key, value in result.items():
        print(f"{key:>22}: {value}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
