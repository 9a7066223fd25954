"""Audit throughput: draws per second and time to a verdict for each built-in mechanism.

``python -m bench.audit [--samples N]`` prints a table and writes ``bench/results/audit.json``.
Draw rate is the mechanism's own sampling speed inside the audit; ``verdict_s`` is the whole
audit (screening, draws, event search, exact checks); ``overhead`` = verdict_s / draw time.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

BUILT_INS = {
    "laplace_dx": {"eta": 5.0},
    "text2text": {"eta": 5.0},
    "santext": {"epsilon": 2.0},
    "santext_plus": {"epsilon": 2.0, "p": 1.0},
    "custext": {"epsilon": 2.0, "top_k": 5},
    "custext_plus": {"epsilon": 2.0, "top_k": 5},
    "dx_stencil": {"eta": 5.0},
    "stencil": {},
}
RESULTS = Path(__file__).parent / "results" / "audit.json"


def run(samples: int, seed: int, names: list[str]) -> list[dict]:
    """Audit each mechanism in ``names`` and collect timings and verdicts."""
    from dpkit.audit import audit
    from dpkit.contract.plugins import get_registry

    registry = get_registry()
    rows = []
    for name in names:
        if name not in registry.entries["mechanism"]:
            print(f"skip {name}: not registered (plug-in missing or broken)")
            continue
        report = audit(name, BUILT_INS[name], samples=samples, seed=seed, registry=registry)
        head = report.headline
        rows.append({
            "mechanism": name, "params": BUILT_INS[name], "verdict": report.verdict.value,
            "claimed": head.claimed if head else None, "measured": head.measured if head else None,
            "strategies": report.strategies, "samples_drawn": report.samples_drawn,
            "draws_per_s": (report.samples_drawn / report.draw_seconds
                            if report.draw_seconds else None),
            "verdict_s": report.seconds,
            "overhead": report.seconds / report.draw_seconds if report.draw_seconds else None,
        })
    return rows


def false_alarms(seeds: int, samples: int, names: list[str]) -> dict[str, dict[str, int]]:
    """Verdict counts of each (correct) built-in over ``seeds`` seeds: FAILs are false alarms."""
    from dpkit.audit import audit
    from dpkit.contract.plugins import get_registry

    registry = get_registry()
    out = {}
    for name in names:
        if name not in registry.entries["mechanism"] or name in ("dx_stencil", "stencil"):
            continue
        counts = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
        for seed in range(seeds):
            counts[audit(name, BUILT_INS[name], samples=samples, seed=seed,
                         registry=registry).verdict.value] += 1
        out[name] = counts
    return out


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table, write the JSON."""
    from tabulate import tabulate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="draws per input")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=list(BUILT_INS), help="mechanisms to run")
    parser.add_argument("--seeds", type=int, default=0,
                        help="also audit each per-token built-in over this many seeds and count "
                        "verdicts (false-alarm rate; dx_stencil and stencil skipped)")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    rows = run(args.samples, args.seed, args.only)
    print(tabulate([[r["mechanism"], r["verdict"], _f(r["claimed"]), _f(r["measured"]),
                     r["samples_drawn"], _f(r["draws_per_s"]), _f(r["verdict_s"]),
                     _f(r["overhead"])] for r in rows],
                   headers=["mechanism", "verdict", "claimed ε", "measured ε", "draws",
                            "draws/s", "verdict s", "verdict/draw time"]))
    alarms = false_alarms(args.seeds, args.samples, args.only) if args.seeds else {}
    for name, counts in alarms.items():
        print(f"{name}: over {args.seeds} seeds {counts} (FAIL = false alarm)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"samples": args.samples, "seed": args.seed,
                                   "false_alarms": alarms,
                                   "machine": platform.platform(), "threads":
                                   torch.get_num_threads(), "results": rows}, indent=2,
                                  default=str))
    print(f"wrote {RESULTS}")


def _f(value) -> str:
    return "-" if value is None else f"{value:.3g}"


if __name__ == "__main__":
    main()
