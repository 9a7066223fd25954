"""Power of the paired test: simulated detection rates at the reported effect, closed forms, and
the power note of a verdict."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats as st

from dpkit.evidence import Claim, evaluate, format_verdicts, write_claims
from dpkit.evidence.power import POWER, detectable_effect, power, seeds_needed
from dpkit.evidence.stats import ALPHA, one_sided_p
from dpkit.base.results import CellResult

SIMULATIONS = 20_000


def rejection_rate(effect: float, sd: float, n: int, alpha: float, seed: int = 0) -> float:
    """Share of simulated paired-normal runs (true mean ``effect``) whose one-sided t test at
    ``alpha`` rejects "mean ≤ 0"."""
    d = np.random.default_rng(seed).normal(effect, sd, size=(SIMULATIONS, n))
    t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
    return float((st.t.sf(t, n - 1) < alpha).mean())


@pytest.mark.parametrize("n,points", [(3, 1), (3, 3), (5, 2), (10, 1), (30, 4)])
def test_runs_at_the_detectable_effect_reject_at_the_stated_power(n, points):
    alpha = ALPHA / points
    effect = detectable_effect(0.7, n, alpha)
    rate = rejection_rate(effect, 0.7, n, alpha)
    assert rate == pytest.approx(POWER, abs=0.015)  # Monte-Carlo sd ≈ 0.003
    # a normal (z) approximation understates the effect small samples need: it would fail here
    z_effect = (st.norm.ppf(1 - alpha) + st.norm.ppf(POWER)) * 0.7 / math.sqrt(n)
    if n <= 5:
        assert rejection_rate(z_effect, 0.7, n, alpha) < POWER - 0.1


def test_detectable_effect_meets_the_normal_closed_form_for_many_seeds():
    n, alpha = 20_000, 0.025
    closed = (st.norm.ppf(1 - alpha) + st.norm.ppf(POWER)) * 2.0 / math.sqrt(n)
    assert detectable_effect(2.0, n, alpha) == pytest.approx(closed, rel=2e-3)
    # and it scales with the spread and with 1/√n
    assert detectable_effect(4.0, 50, alpha) == pytest.approx(2 * detectable_effect(2.0, 50, alpha))


def test_seeds_needed_is_the_first_n_with_the_power():
    effect, sd, alpha = 0.05, 0.04, ALPHA / 2
    n = seeds_needed(effect, sd, alpha)
    assert n is not None and n > 2
    assert power(effect, sd, n, alpha) >= POWER > power(effect, sd, n - 1, alpha)
    assert rejection_rate(effect, sd, n, alpha, seed=1) == pytest.approx(
        power(effect, sd, n, alpha), abs=0.015)
    # the detectable effect at that n is at most the effect
    assert detectable_effect(sd, n, alpha) <= effect < detectable_effect(sd, n - 1, alpha)


def test_edge_cases():
    assert math.isnan(detectable_effect(0.1, 1, ALPHA))
    assert math.isnan(detectable_effect(math.nan, 3, ALPHA))
    assert detectable_effect(0.0, 3, ALPHA) == 0.0  # deterministic metric: any effect is decided
    assert seeds_needed(0.01, 0.0, ALPHA) == 2
    assert seeds_needed(0.0, 0.1, ALPHA) is None and seeds_needed(-0.1, 0.1, ALPHA) is None
    assert seeds_needed(1e-6, 1.0, ALPHA) is None  # beyond MAX_SEEDS
    with pytest.raises(ValueError, match="at least 2 seeds"):
        power(0.1, 0.1, 1, ALPHA)


def paired_rows(diffs_by_eta: dict[float, list[float]]) -> list[CellResult]:
    rows = []
    for eta, diffs in diffs_by_eta.items():
        for seed, d in enumerate(diffs):
            for method, value in (("A", 0.5 + d), ("B", 0.5)):
                rows.append(CellResult(key=f"{method}{eta}{seed}", method=method,
                                       point={"eta": eta}, seed=seed, metrics={"acc": value}))
    return rows


def claim(**kw) -> Claim:
    return Claim(**{"method": "A", "versus": "B", "metric": "acc", "direction": "greater",
                    "over": "eta", **kw})


def test_a_verdict_reports_the_detectable_effect_and_the_seeds_for_the_papers():
    diffs = {1.0: [0.01, 0.05, -0.02], 2.0: [0.02, 0.03, 0.00]}
    result = evaluate(claim(margin=0.01, paper_effect=0.06, paper_source="Table 9"),
                      paired_rows(diffs))
    assert result.verdict == "undecided"
    for p in result.points:
        sd = float(np.std(diffs[p.at], ddof=1))
        assert p.detectable == pytest.approx(0.01 + detectable_effect(sd, 3, ALPHA / 2))
        assert p.seeds_for_paper == seeds_needed(0.05, sd, ALPHA / 2)
    worst = max(p.seeds_for_paper for p in result.points)
    assert result.power_note.endswith(f"the paper's effect +0.06 with that power takes ≈ {worst} "
                                      "seeds")
    assert result.headline.startswith("undecided — with 3 seeds the run had 80 % power to show "
                                      "this if, in truth, A is at least ")
    text = format_verdicts([result])
    assert "80 % power at diff ≥ +" in text and "the paper's +0.06 needs" in text


def test_a_less_claim_detects_below_its_threshold_and_says_when_no_paper_effect_is_given():
    result = evaluate(claim(direction="less"), paired_rows({1.0: [-0.01, 0.02, 0.0]}))
    (p,) = result.points
    assert p.detectable < 0
    assert result.power_note.startswith("with 3 seeds the run had 80 % power to show this if, in "
                                        f"truth, A is at least {-p.detectable:.2g} below B in acc")
    assert result.power_note.endswith("no paper effect given")


def test_a_point_without_spread_says_any_difference_beyond_the_threshold_is_detected():
    # two students that both kept their start: the paired difference is exactly 0 at every seed
    result = evaluate(claim(direction="less"), paired_rows({1.0: [0.0, 0.0, 0.0]}))
    assert result.power_note.startswith("the paired differences do not vary between seeds, so "
                                        "the sign decides: this shows wherever A is below B in acc")
    assert "-0" not in result.power_note
    assert "; no spread: the sign decides" in format_verdicts([result])


def test_holds_at_the_detectable_effect_about_as_often_as_the_power_says():
    """End to end through evaluate(): runs whose true difference is the detectable effect of the
    true spread hold in ≈ 80 % of repetitions (one point, so no correction)."""
    n, sd = 6, 0.03
    effect = detectable_effect(sd, n, ALPHA)
    rng = np.random.default_rng(7)
    held = sum(evaluate(claim(), paired_rows({1.0: list(rng.normal(effect, sd, n))})).verdict
               == "holds" for _ in range(600))
    assert held / 600 == pytest.approx(POWER, abs=0.06)


def test_one_sided_p_and_power_use_the_same_test():
    rng = np.random.default_rng(3)
    d = list(rng.normal(0.1, 0.2, 5))
    t = np.mean(d) / (np.std(d, ddof=1) / math.sqrt(5))
    assert one_sided_p(d, 0.0, True) == pytest.approx(st.t.sf(t, 4))


def test_paper_effect_is_validated():
    with pytest.raises(ValidationError, match="go together"):
        claim(paper_effect=0.1)
    with pytest.raises(ValidationError, match="does not support the claim"):
        claim(paper_effect=-0.1, paper_source="Table 1")
    with pytest.raises(ValidationError, match="does not support the claim"):
        claim(direction="less", margin=0.05, paper_effect=-0.01, paper_source="Table 1")
    with pytest.raises(ValidationError, match="one number"):
        claim(at="matched", over=None, privacy="pr5", paper_effect={1: 0.1},
              paper_source="Fig. 2")
    with pytest.raises(ValidationError, match="finite"):
        claim(paper_effect=math.inf, paper_source="Table 1")
    ok = claim(paper_effect={1: 0.1, 2: 0.2}, paper_source="Table 1")
    assert ok.paper_effect_at(2.0) == 0.2 and ok.paper_effect_at(4.0) is None


def test_claims_json_carries_the_power_fields(tmp_path):
    result = evaluate(claim(paper_effect=0.04, paper_source="Table 9"),
                      paired_rows({1.0: [0.01, 0.05, -0.02]}))
    write_claims([result], tmp_path / "claims.json")
    doc = json.loads((tmp_path / "claims.json").read_text())
    assert doc["power"] == POWER
    (entry,) = doc["claims"]
    assert entry["power_note"] == result.power_note
    point = entry["points"][0]
    assert point["detectable"] > 0.04 and point["paper_effect"] == 0.04
    assert isinstance(point["seeds_for_paper"], int)


def test_a_claim_without_a_swept_axis_prints_its_one_point_without_a_location():
    rows = [replace(r, point={}) for r in paired_rows({1.0: [0.02, 0.03, 0.04]})]
    result = evaluate(claim(over=None), rows)
    assert [p.at for p in result.points] == [None]
    text = format_verdicts([result])
    assert "None" not in text and "\n      A=0.53 B=0.5 diff=+0.03" in text, text
