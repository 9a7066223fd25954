"""Gains over each method's own floor, crossover ε, reference ratios, paired comparisons."""

from __future__ import annotations

import json

import pytest
from dpkit_dped.summary import (
    crossover,
    floor_by_seed,
    gains,
    gains_table,
    grouped,
    headline_table,
    load_rows,
    paired_differences,
    reference_table,
)


def row(method, eps, ppl, seed=0, queries=None, converged=1.0, best_step=None):
    params = {} if eps is None else {"target_epsilon": eps}
    point = {} if eps is None else {"target_epsilon": eps}
    if queries:
        params["num_queries"] = point["num_queries"] = queries
    metrics = {"perplexity": ppl, "converged": converged}
    if best_step is not None:
        metrics["best_step"] = best_step
    return {"key": f"{method}-{eps}-{seed}-{queries}", "method": method, "params": params,
            "point": point, "seed": seed, "metrics": metrics}


SEEDS = (0, 1, 2)
ROWS = ([row("public only", None, 2000.0 + 30 * s, s) for s in SEEDS]
        + [row("teacher ensemble", None, 1500.0, s) for s in SEEDS]
        + [row("DPED, noiseless", None, 1500.0 * (1.04 + 0.01 * s), s) for s in SEEDS]
        # DP-SGD's own floor improves with ε; DP-SGD is 50 below it from ε = 8 only
        + [row("DP-SGD recipe, public data", e, f, s) for e, f in ((1, 1700.0), (8, 1650.0))
           for s in SEEDS]
        + [row("DP-SGD", e, p + s, s) for e, p in ((1, 1700.0), (8, 1600.0)) for s in SEEDS]
        + [row("DPED", e, 2000.0 + 30 * s + d, s, queries=300, best_step=0 if d == 0 else 4)
           for e, d in ((1, 0.0), (8, -5.0)) for s in SEEDS])


def test_each_method_is_measured_against_its_own_floor():
    groups = grouped(ROWS)
    sgd = gains(groups["DP-SGD"], floor_by_seed(groups["DP-SGD recipe, public data"]))
    assert sgd == {1: [0.0, -1.0, -2.0], 8: [50.0, 49.0, 48.0]}
    dped = gains(groups["DPED, 300 queries"], floor_by_seed(groups["public only"]))
    assert dped == {1: [0.0, 0.0, 0.0], 8: [5.0, 5.0, 5.0]}  # paired with each seed's floor
    assert crossover(sgd) == 8 and crossover(dped) == 8
    assert crossover({1: [0.0, 0.0, 0.0]}) is None  # a student that kept its start gained nothing


def test_crossover_needs_the_whole_interval_above_zero():
    assert crossover({1: [30.0, -20.0, 10.0], 8: [12.0, 9.0, 10.0]}) == 8
    assert crossover({1: [3.0]}) == 1  # one seed: its value


def test_tables_from_a_results_file(tmp_path):
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS))
    rows = load_rows(tmp_path)
    table = "\n".join(headline_table(rows))
    assert "| DP-SGD | 1,701 | 1,601 | 3 | 0 | – |" in table
    assert "| DPED, 300 queries | 2,030 | 2,025 | 3 | 0 | 3 of 6 |" in table
    assert "| public only | 2,030 | 2,030 | 3 | 0 | – |" in table
    gain = "\n".join(gains_table(rows))
    assert "| DP-SGD | DP-SGD recipe, public data | -1 [-3.48, 1.48] | 49 [46.5, 51.5] | 8 |" in gain
    assert "| DPED, 300 queries | public only | 0 [0, 0] | 5 [5, 5] | 8 |" in gain
    refs = "\n".join(reference_table(rows))
    assert "| DPED, noiseless | 1,575 [1,538, 1,612] | 1.05 [1.03, 1.07] | 3 |" in refs
    diffs = paired_differences(rows, "DPED, 300 queries", "DP-SGD")
    assert diffs[2].startswith("| 1 | 2,030 | 1,701 | 329 [")


def test_a_run_without_the_floor_says_what_to_run():
    with pytest.raises(ValueError, match="dped_public"):
        headline_table([r for r in ROWS if r["method"] != "public only"])


def test_the_recovery_table_reads_both_calibration_halves():
    from dpkit_dped.summary import recovery_table

    rows = [{**r, "metrics": {**r["metrics"], "ensemble_gain_recovered": 0.8 + 0.05 * r["seed"],
                              "ensemble_gain_recovered_alt": 0.81}}
            for r in ROWS if r["method"] in ("DPED, noiseless", "teacher ensemble")]
    table = "\n".join(recovery_table(rows))
    assert "| DPED, noiseless | 0.85 [0.726, 0.974] | 0.81 [0.81, 0.81] | 3 |" in table
    assert "DP-SGD" not in table
