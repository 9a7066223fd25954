"""How verdicts are printed: which method is A and which B, the margin beside the difference, and
an interrupted run's claims waiting for cells rather than naming a missing method."""

from __future__ import annotations

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
