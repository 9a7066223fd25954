"""Claims on synthetic paired rows: each verdict, matched privacy, references, margins, errors."""

from __future__ import annotations

import dataclasses

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs
from pydantic import ValidationError

from dpkit.evidence import Claim, evaluate, format_verdicts, holm
from dpkit.base.results import CellResult


def rows_for(method, etas, seeds, metric, privacy=None, params=None, noise=0.01):
    """One row per (η, seed); ``metric``/``privacy`` map η to a value, noise is seed-keyed."""
    out = []
    for eta in etas:
        for s in seeds:
            rng = np.random.default_rng([s, int((eta or 0) * 100), sum(map(ord, method))])
            m = {"acc": metric(eta) + noise * rng.standard_normal()}
            if privacy:
                m["pr5"] = privacy(eta)
            point = {"eta": eta} if eta is not None else {}
            out.append(CellResult(key=f"{method}{eta}{s}", method=method, point=point,
                                  params=dict(params or {}), seed=s, metrics=m))
    return out


def claim(**kw):
    return Claim(**{"method": "A", "versus": "B", "metric": "acc", "direction": "greater",
                    "over": "eta", **kw})


SEEDS = range(5)


def test_clearly_better_holds_clearly_worse_is_refuted_tie_is_undecided():
    b = rows_for("B", [1, 2, 4], SEEDS, lambda e: 0.5 + e / 10)
    better = rows_for("A", [1, 2, 4], SEEDS, lambda e: 0.6 + e / 10)
    worse = rows_for("A", [1, 2, 4], SEEDS, lambda e: 0.4 + e / 10)
    tie = rows_for("A", [1, 2, 4], SEEDS, lambda e: 0.5 + e / 10, noise=0.05)
    assert evaluate(claim(), better + b).verdict == "holds"
    assert evaluate(claim(), worse + b).verdict == "refuted"
    assert evaluate(claim(), tie + b).verdict == "undecided"
    # a margin larger than the true gap turns "holds" into "refuted"
    assert evaluate(claim(margin=0.2), better + b).verdict == "refuted"
    # non-inferiority: 0.1 worse is within a margin of -0.15
    assert evaluate(claim(margin=-0.15), worse + b).verdict == "holds"


def test_points_numbers_are_paired_and_holm_corrected():
    b = rows_for("B", [1, 2, 4], SEEDS, lambda e: 0.5)
    a = rows_for("A", [1, 2, 4], SEEDS, lambda e: 0.5 + 0.01 * e)
    result = evaluate(claim(points=[2, 4]), a + b)
    assert [p.at for p in result.points] == [2.0, 4.0]
    assert holm([p.p for p in result.points]) == [p.p_holm for p in result.points]
    for p in result.points:
        by_seed = {(r.method, r.seed): r.metrics["acc"] for r in a + b if r.point["eta"] == p.at}
        diffs = [by_seed[("A", s)] - by_seed[("B", s)] for s in SEEDS]
        assert math.isclose(p.diff["mean"], float(np.mean(diffs)), abs_tol=1e-12)
        assert p.diff["ci_low"] < p.diff["mean"] < p.diff["ci_high"] and p.seeds == list(SEEDS)


def test_one_seed_is_always_undecided_and_says_why():
    b = rows_for("B", [1, 2], [0], lambda e: 0.1)
    a = rows_for("A", [1, 2], [0], lambda e: 0.9)
    result = evaluate(claim(), a + b)
    assert result.verdict == "undecided" and "fewer than 2 paired seeds" in result.reason
    assert "UNDECIDED" in format_verdicts([result])


def test_unswept_reference_pairs_with_every_point_and_params_place_fixed_methods():
    full = rows_for("Full", [40, 60, 120], SEEDS, lambda e: 0.7)
    ablation = rows_for("Ablation", [None], SEEDS, lambda e: 0.6, params={"eta": 60})
    result = evaluate(claim(method="Ablation", versus="Full", direction="less"), full + ablation)
    assert [p.at for p in result.points] == [60.0] and result.verdict == "holds"
    plain = rows_for("Plain", [None], SEEDS, lambda e: 1.0, noise=0.0)
    per_k = evaluate(claim(method="A", versus="Plain", direction="less", margin=0.5),
                     rows_for("A", [1, 2, 4], SEEDS, lambda e: 0.1) + plain)
    assert [p.at for p in per_k.points] == [1.0, 2.0, 4.0] and per_k.verdict == "holds"


def test_relative_margin_for_fewer_bytes():
    full = rows_for("B", [1], SEEDS, lambda e: 1000.0, noise=0.0)
    small = rows_for("A", [1], SEEDS, lambda e: 150.0, noise=0.0)
    half = rows_for("A", [1], SEEDS, lambda e: 500.0, noise=0.0)
    fewer = claim(direction="less", margin=0.8, relative=True, metric="acc")
    assert evaluate(fewer, small + full).verdict == "holds"
    assert evaluate(fewer, half + full).verdict == "refuted"
    assert "0.2 × B" in fewer.title()


def test_matched_privacy_differs_from_equal_sweep():
    # same accuracy at each η, but A leaks half as much: at matched privacy A is more accurate
    b = rows_for("B", [1, 2, 4, 8], SEEDS, lambda e: e / 10, privacy=lambda e: e / 10)
    a = rows_for("A", [1, 2, 4, 8], SEEDS, lambda e: e / 10, privacy=lambda e: e / 20)
    assert evaluate(claim(), a + b).verdict == "undecided"
    matched = evaluate(claim(at="matched", over=None, privacy="pr5"), a + b)
    assert matched.verdict == "holds", matched.reason
    assert all(0.1 <= p.at <= 0.4 for p in matched.points)  # the overlap of both ranges
    far = evaluate(claim(at="matched", over=None, privacy="pr5", points=[0.9]), a + b)
    assert far.verdict == "undecided" and "outside the range" in far.reason


def test_missing_metric_and_ambiguous_cells_are_explained():
    b = rows_for("B", [1], SEEDS, lambda e: 0.5)
    a = rows_for("A", [1], SEEDS, lambda e: 0.6)
    missing = evaluate(claim(metric="f1"), a + b)
    assert missing.verdict == "undecided" and "'f1'" in missing.reason and "acc" in missing.reason
    twice = [replace(r, point={**r.point, "eps": e}) for r in a for e in (0.1, 1.0)]
    ambiguous = evaluate(claim(), twice + b)
    assert "several cells" in ambiguous.reason and "eps" in ambiguous.reason
    assert evaluate(claim(where={"eps": 1.0}), twice + b).verdict == "holds"


@pytest.mark.parametrize("bad, message", [
    ({"at": "matched"}, "needs `privacy:`"),
    ({"privacy": "pr5"}, "only used with at: matched"),
    ({"versus": "A"}, "compare two methods"),
    ({"direction": "less", "relative": True, "margin": 1.5}, "fraction"),
    ({"points": []}, "points is empty"),
    ({"colour": "red"}, "Extra inputs"),
])
def test_schema_rejects(bad, message):
    with pytest.raises(ValidationError, match=message):
        claim(**bad)


@given(hs.lists(hs.floats(-1, 1), min_size=2, max_size=6), hs.floats(-0.5, 0.5))
def test_at_one_point_holds_exactly_when_the_interval_lies_beyond_the_margin(diffs, margin):
    rows = [CellResult(key=f"{m}{s}", method=m, point={"eta": 1}, seed=s, metrics={"acc": v})
            for s, d in enumerate(diffs) for m, v in (("A", d), ("B", 0.0))]
    result = evaluate(claim(margin=margin), rows)
    d = result.points[0].diff
    if math.isfinite(d["ci_low"]) and d["sd"] > 1e-9 and abs(d["ci_low"] - margin) > 1e-9 \
            and abs(d["ci_high"] - margin) > 1e-9:
        assert (result.verdict == "holds") == (d["ci_low"] > margin)
        assert (result.verdict == "refuted") == (d["ci_high"] < margin)


def _with_alt(rows, alt):
    """Copies of ``rows`` with a second metric ``acc_alt`` = alt(η, acc)."""
    return [dataclasses.replace(r, metrics={**r.metrics, "acc_alt": alt(r.point["eta"],
                                                                         r.metrics["acc"])})
            for r in rows]


def test_a_claim_is_judged_again_on_its_robustness_metrics_and_says_whether_it_moves():
    b = _with_alt(rows_for("B", [1, 2], SEEDS, lambda e: 0.5), lambda e, v: v)
    a_same = _with_alt(rows_for("A", [1, 2], SEEDS, lambda e: 0.6), lambda e, v: v + 0.01)
    a_moved = _with_alt(rows_for("A", [1, 2], SEEDS, lambda e: 0.6), lambda e, v: v - 0.2)
    robust = claim(robustness=["acc_alt"])
    same, moved = evaluate(robust, a_same + b), evaluate(robust, a_moved + b)
    assert same.verdict == moved.verdict == "holds"
    assert same.robustness == {"acc_alt": "holds"} and moved.robustness == {"acc_alt": "refuted"}
    text = format_verdicts([same, moved])
    assert "robustness: on acc_alt holds (same)" in text
    assert "robustness: on acc_alt refuted (moved)" in text
    assert text.splitlines()[-1] == ("robustness: 1 of 2 claims keep their verdict on acc_alt; "
                                     "moved: [2] holds → refuted on acc_alt")
    # the main verdict and its numbers do not depend on the robustness metrics
    plain = evaluate(claim(), a_moved + b)
    assert plain.robustness == {} and plain.verdict == moved.verdict
    assert [p.p_holm for p in plain.points] == [p.p_holm for p in moved.points]


def test_a_robustness_metric_no_cell_reports_is_undecided_and_counts_as_moved():
    b = rows_for("B", [1], SEEDS, lambda e: 0.5)
    a = rows_for("A", [1], SEEDS, lambda e: 0.6)
    result = evaluate(claim(robustness=["nowhere"]), a + b)
    assert result.verdict == "holds" and result.robustness == {"nowhere": "undecided"}
    assert "0 of 1 claims keep" in format_verdicts([result])


def test_robustness_names_other_metrics_once():
    with pytest.raises(ValidationError, match="robustness"):
        claim(robustness=["acc"])
    with pytest.raises(ValidationError, match="robustness"):
        claim(robustness=["x", "x"])
    rows = rows_for("A", [1], SEEDS, lambda e: 0.6) + rows_for("B", [1], SEEDS, lambda e: 0.5)
    assert "robustness" not in format_verdicts([evaluate(claim(), rows)])
