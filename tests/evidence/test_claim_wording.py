"""How verdicts are printed: which method is A and which B, the margin beside the difference, and
an interrupted run's claims waiting for cells rather than naming a missing method."""

from __future__ import annotations

import dataclasses

import numpy as np

from dpkit.evidence import Claim, evaluate, evaluate_all, format_verdicts
from dpkit.spec import Spec
from dpkit.base.results import CellResult


def rows(method, shift, seeds=range(4)):
    out = []
    for eta in (1, 2):
        for s in seeds:
            noise = 0.01 * np.random.default_rng([s, eta, len(method)]).standard_normal()
            out.append(CellResult(key=f"{method}{eta}{s}", method=method, point={"eta": eta},
                                  seed=s, metrics={"acc": 0.5 + shift + noise}))
    return out


def test_roles_and_non_inferiority_margin_are_printed():
    claim = Claim(method="Cosine", versus="Laplace", metric="acc", direction="greater",
                  margin=-0.03, over="eta")
    text = format_verdicts([evaluate(claim, rows("Cosine", -0.01) + rows("Laplace", 0.0))])
    assert "A = Cosine, B = Laplace; diff = A − B in acc" in text
    points = [line for line in text.splitlines() if line.strip().startswith("at ")]
    assert len(points) == 2
    assert all("(needs > -0.03, a non-inferiority margin)" in line for line in points)


def test_zero_margin_reads_as_zero_and_relative_margin_names_its_factor():
    less = Claim(method="X", versus="Y", metric="acc", direction="less", over="eta")
    text = format_verdicts([evaluate(less, rows("X", -0.2) + rows("Y", 0.0))])
    assert "(needs < 0)" in text and "-0)" not in text
    relative = Claim(method="X", versus="Y", metric="acc", direction="greater", margin=0.1,
                     relative=True, over="eta")
    assert "diff = A − 1.1·B" in format_verdicts([evaluate(relative, rows("X", 0.2) +
                                                           rows("Y", 0.0))])


def test_a_method_without_finished_cells_is_waiting_not_missing():
    spec = Spec.model_validate({
        "name": "t", "data": {"name": "d"}, "defense": {"name": "a", "label": "Cosine"},
        "baselines": [{"name": "b", "label": "Laplace"}],
        "claims": [{"method": "Cosine", "versus": "Laplace", "metric": "acc",
                    "direction": "greater", "over": "eta"},
                   {"method": "Laplace", "versus": "Typo", "metric": "acc",
                    "direction": "greater", "over": "eta"}]})
    waiting, typo = evaluate_all(spec, rows("Laplace", 0.0))
    assert waiting.verdict == "undecided"
    assert waiting.reason.startswith("no finished cells yet of 'Cosine'")
    assert "no method labelled 'Typo'" in typo.reason  # not a label of the spec: said so


def paired(diffs_by_eta: dict[float, list[float]], a="Cosine", b="Laplace") -> list[CellResult]:
    out = []
    for eta, diffs in diffs_by_eta.items():
        for seed, d in enumerate(diffs):
            for method, value in ((a, 0.6 + d), (b, 0.6)):
                out.append(CellResult(key=f"{method}{eta}{seed}", method=method,
                                      point={"eta": eta}, seed=seed,
                                      metrics={"accuracy": value}))
    return out


def test_a_non_inferiority_claim_says_how_far_below_b_a_may_truly_be():
    """The issue's example: "detects ≥ -0.00589" becomes "A is at most 0.0059 below B"."""
    claim = Claim(method="Cosine", versus="Laplace", metric="accuracy", direction="greater",
                  margin=-0.03, over="eta")
    result = evaluate(claim, paired({5.0: [-0.004, 0.001, -0.002, 0.0]}))
    (p,) = result.points
    assert -0.03 < p.detectable < 0  # the numbers themselves are unchanged (claims.json)
    assert result.power_note.startswith(
        f"with 4 seeds the run had 80 % power to show this if, in truth, Cosine is at most "
        f"{-p.detectable:.2g} below Laplace in accuracy")
    assert "detects" not in format_verdicts([result])


def test_superiority_and_less_claims_say_at_least_above_or_below():
    greater = Claim(method="Cosine", versus="Laplace", metric="accuracy", direction="greater",
                    over="eta")
    (p,) = (r := evaluate(greater, paired({5.0: [0.02, 0.05, 0.01]}))).points
    assert f"Cosine is at least {p.detectable:.2g} above Laplace in accuracy" in r.power_note
    less = Claim(method="Cosine", versus="Laplace", metric="accuracy", direction="less",
                 margin=0.5, over="eta")
    (q,) = (r := evaluate(less, paired({5.0: [-0.6, -0.55, -0.7]}))).points
    assert q.detectable < -0.5
    assert f"Cosine is at least {-q.detectable:.2g} below Laplace in accuracy" in r.power_note


def test_a_relative_claim_names_the_factor_and_several_points_name_the_axis_once():
    claim = Claim(method="Cosine", versus="Laplace", metric="accuracy", direction="less",
                  margin=0.2, relative=True, over="eta")
    result = evaluate(claim, paired({1.0: [-0.3, -0.35, -0.32], 2.0: [-0.3, -0.36, -0.31]}))
    first, second = result.points
    note = result.power_note
    assert (f"Cosine is below 0.8 × Laplace by at least {-first.detectable:.2g} in accuracy at "
            f"eta = 1, by at least {-second.detectable:.2g} at 2") in note
    assert note.count("eta") == 1


def test_large_effects_are_written_without_exponents():
    claim = Claim(method="DPED", versus="PATE", metric="perplexity", direction="less",
                  over="eta")
    rows = [dataclasses.replace(r, metrics={"perplexity": 1500 + 400 * (r.method == "DPED")
                                            + r.metrics["accuracy"] * 1000})
            for r in paired({1.0: [0.01, 0.2, 0.05]}, "DPED", "PATE")]
    result = evaluate(claim, rows)
    assert "e+" not in result.power_note and "e-" not in result.power_note
