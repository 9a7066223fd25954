"""Ledger benchmarks: overhead over raw dp-accounting, grouped vs one-by-one PLD, 10⁵ RDP spends.

Run ``python -m bench.accounting`` (``--quick`` for a smaller run). Prints ratios and writes
``bench/results/accounting.json``. One-by-one PLD composition of 10⁴ events would take many
minutes, so it is timed on a prefix and extrapolated linearly; the cost of each PLD convolution
grows with the composed support, so the extrapolation *under*-states the one-by-one time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import dp_accounting
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import DpGuarantee, Ledger

DELTA = 1e-5
RESULTS = Path(__file__).resolve().parent / "results" / "accounting.json"


def draw(kinds: list, n: int, seed: int = 0) -> list:
    """``n`` events drawn uniformly from ``kinds`` (seeded)."""
    rng = random.Random(seed)
    return [kinds[rng.randrange(len(kinds))] for _ in range(n)]


def best_of(repeats: int, fn) -> tuple[float, object]:
    """Smallest wall time of ``repeats`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def ledger_epsilon(guarantees: list, accountant: str) -> float:
    """Spend every guarantee on a fresh ledger and return ε(δ)."""
    ledger = Ledger(delta=DELTA, accountant=accountant)
    for g in guarantees:
        ledger.spend(g, "step")
    return ledger.epsilon()


def raw_grouped(events: list, accountant) -> float:
    """What a careful dp-accounting user writes: count events, compose SelfComposed groups."""
    counts = Counter(events)
    acct = accountant()
    acct.compose(dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(e, c) for e, c in counts.items()]))
    return acct.get_epsilon(DELTA)


def raw_one_by_one(events: list, accountant) -> float:
    """Compose every event separately (no grouping)."""
    acct = accountant()
    for e in events:
        acct.compose(e)
    return acct.get_epsilon(DELTA)


def overhead(n: int, repeats: int) -> dict:
    """Ledger vs raw dp-accounting (RDP) on ``n`` DP-SGD-like spends of 20 kinds."""
    kinds = [dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0 + 0.1 * i))
             for i in range(20)]
    events = draw(kinds, n)
    guarantees = [DpGuarantee(e) for e in events]
    t_raw, eps_raw = best_of(repeats, lambda: raw_grouped(events, RdpAccountant))
    t_ledger, eps_ledger = best_of(repeats, lambda: ledger_epsilon(guarantees, "rdp"))
    t_ungrouped, eps_one = best_of(1, lambda: raw_one_by_one(events, RdpAccountant))
    return {"spends": n, "kinds": 20, "raw_grouped_s": t_raw, "ledger_s": t_ledger,
            "raw_one_by_one_s": t_ungrouped, "overhead_ratio": t_ledger / t_raw,
            "epsilon": eps_ledger, "epsilon_rel_diff_vs_raw_grouped": abs(eps_ledger - eps_raw) / eps_raw,
            "epsilon_rel_diff_vs_one_by_one": abs(eps_ledger - eps_one) / eps_one}


def pld_grouping(n: int, prefix: int) -> dict:
    """PLD: ledger (grouped) on ``n`` spends of 20 Gaussian kinds vs one by one (prefix, extrapolated)."""
    kinds = [dp_accounting.GaussianDpEvent(40.0 + 2.0 * i) for i in range(20)]
    events = draw(kinds, n)
    guarantees = [DpGuarantee(e) for e in events]
    t_grouped, eps_grouped = best_of(1, lambda: ledger_epsilon(guarantees, "pld"))
    t_prefix, eps_prefix_one = best_of(1, lambda: raw_one_by_one(events[:prefix], PLDAccountant))
    eps_prefix_grouped = ledger_epsilon(guarantees[:prefix], "pld")
    eps_rdp_grouped = ledger_epsilon(guarantees, "rdp")
    eps_rdp_one = raw_one_by_one(events, RdpAccountant)
    extrapolated = t_prefix * n / prefix
    return {"spends": n, "kinds": 20, "grouped_s": t_grouped, "one_by_one_prefix": prefix,
            "one_by_one_prefix_s": t_prefix, "one_by_one_extrapolated_s": extrapolated,
            "speedup_lower_bound": extrapolated / t_grouped, "epsilon_grouped": eps_grouped,
            "prefix_epsilon_grouped": eps_prefix_grouped, "prefix_epsilon_one_by_one": eps_prefix_one,
            "prefix_pld_rel_diff": abs(eps_prefix_grouped - eps_prefix_one) / eps_prefix_one,
            "rdp_rel_diff_grouped_vs_one_by_one": abs(eps_rdp_grouped - eps_rdp_one) / eps_rdp_one}


def many_rdp(n: int) -> dict:
    """Wall and CPU time of ``n`` RDP spends (20 kinds), then of one ε query."""
    kinds = [DpGuarantee(dp_accounting.PoissonSampledDpEvent(0.001, dp_accounting.GaussianDpEvent(
        2.0 + 0.05 * i))) for i in range(20)]
    guarantees = draw(kinds, n)
    ledger = Ledger(delta=DELTA)
    wall, cpu = time.perf_counter(), time.process_time()
    for g in guarantees:
        ledger.spend(g, "step")
    spend_wall, spend_cpu = time.perf_counter() - wall, time.process_time() - cpu
    eps = ledger.epsilon()
    total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"spends": n, "spend_seconds": spend_wall, "spend_cpu_seconds": spend_cpu,
            "seconds": total_wall, "cpu_seconds": total_cpu, "spends_per_second": n / spend_wall,
            "epsilon": eps}


def main(argv: list[str] | None = None) -> dict:
    """Run the three benchmarks, print ratios, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args(argv)
    sizes = dict(over=500, pld=1000, prefix=50, rdp=10_000) if args.quick else \
        dict(over=2000, pld=10_000, prefix=200, rdp=100_000)
    out = {"quick": args.quick, "delta": DELTA, "load_average_1min": os.getloadavg()[0],
           "cpus": os.cpu_count()}
    out["overhead"] = o = overhead(sizes["over"], repeats=3)
    print(f"ledger vs raw dp-accounting (RDP, {o['spends']} spends): {o['overhead_ratio']:.2f}× "
          f"(target ≤ 1.2×); ungrouped raw composition takes "
          f"{o['raw_one_by_one_s'] / o['ledger_s']:.1f}× the ledger's time")
    out["pld_grouping"] = p = pld_grouping(sizes["pld"], sizes["prefix"])
    print(f"PLD, {p['spends']} spends of 20 kinds: grouped {p['grouped_s']:.2f} s vs one by one "
          f"≥ {p['one_by_one_extrapolated_s']:.0f} s (extrapolated from {p['one_by_one_prefix']}): "
          f"≥ {p['speedup_lower_bound']:.0f}× faster (target ≥ 10×); ε rel. diff on the prefix "
          f"{p['prefix_pld_rel_diff']:.1e} (PLD), {p['rdp_rel_diff_grouped_vs_one_by_one']:.1e} (RDP)")
    out["many_rdp"] = r = many_rdp(sizes["rdp"])
    print(f"{r['spends']} RDP spends: {r['spend_seconds']:.2f} s wall / {r['spend_cpu_seconds']:.2f} s "
          f"CPU; with the ε query {r['seconds']:.2f} s wall / {r['cpu_seconds']:.2f} s CPU "
          f"(target < 1 s; wall time counts other processes on a shared machine)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return out


if __name__ == "__main__":
    main()
