"""Crossover ε and paired comparisons computed from result rows."""

from __future__ import annotations

import json

from dpkit_dped.summary import (
    crossover,
    grouped,
    headline_table,
    load_rows,
    paired_differences,
)


def row(method, eps, ppl, seed=0, queries=None, converged=1.0, best_step=None):
    params = {} if eps is None else {"target_epsilon": eps}
    if queries:
        params["num_queries"] = queries
    metrics = {"perplexity": ppl, "converged": converged}
    if best_step is not None:
        metrics["best_step"] = best_step
    return {"key": f"{method}-{eps}-{seed}-{queries}", "method": method, "params": params,
            "seed": seed, "metrics": metrics}


ROWS = ([row("public only", None, 2000.0), row("non-private", None, 1500.0)]
        + [row("DP-SGD", e, p, s) for e, p in ((1, 2600.0), (8, 1950.0), (64, 1800.0))
           for s in (0, 1, 2)]
        + [row("DPED", e, p + 30 * s, s, queries=300, best_step=0 if e == 1 else 4)
           for e, p in ((1, 5000.0), (8, 1990.0), (64, 1700.0)) for s in (0, 1, 2)])


def test_crossover_needs_the_whole_interval_below_the_floor():
    groups = grouped(ROWS)
    assert crossover(groups["DP-SGD"], floor=2000.0) == 8  # zero spread: 1950 < 2000
    # DPED at ε=8: mean 2020 over seeds 1990/2020/2050 is not below 2000; at 64 it is
    assert crossover(groups["DPED, 300 queries"], floor=2000.0) == 64
    assert crossover(groups["DPED, 300 queries"], floor=1000.0) is None


def test_crossover_pairs_each_cell_with_its_own_seeds_floor():
    floors = {0: 2000.0, 1: 2000.0, 2: 2060.0}  # mean 2020
    kept_start = {1: [row("DPED", 1, 2000.0, 0, queries=300, best_step=0)]}
    assert crossover(kept_start, floors) is None  # equal to its seed's floor, under the mean
    assert crossover(kept_start, 2020.0) == 1  # what an averaged floor would have said
    cells = {8: [row("DPED", 8, floors[s] - 5.0 - s, s, queries=300) for s in (0, 1, 2)]}
    assert crossover(cells, floors) == 8  # paired: 5-7 below each seed's floor


def test_tables_from_a_results_file(tmp_path):
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS))
    rows = load_rows(tmp_path)
    table = "\n".join(headline_table(rows))
    assert "| DP-SGD | 2,600 | 1,950 | 1,800 | 8 | 0 | – |" in table
    assert "| public only | 2,000 | 2,000 | 2,000 | reference | 0 | – |" in table
    assert "| DPED, 300 queries | 5,030 | 2,020 | 1,730 | 64 | 0 | 3 of 9 |" in table
    diffs = paired_differences(rows, "DPED, 300 queries", "DP-SGD")
    assert diffs[2].startswith("| 1 | 5,030 | 2,600 | 2,430 | 3 | no |")
    assert diffs[4].startswith("| 64 | 1,730 | 1,800 | -70 | 3 | yes |")


def test_a_run_without_the_floor_says_what_to_run():
    import pytest

    with pytest.raises(ValueError, match="dped_public"):
        headline_table([r for r in ROWS if r["method"] != "public only"])
