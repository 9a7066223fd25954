"""The built-in mechanisms must not FAIL (false alarms are bugs too)."""

import pytest

from dpkit.audit import Verdict, audit
from dpkit.contract.plugins import get_registry

BUILT_INS = {
    "laplace_dx": ({"eta": 5.0}, 2000),
    "text2text": ({"eta": 5.0}, 1500),
    "santext": ({"epsilon": 2.0}, 1500),
    "santext_plus": ({"epsilon": 2.0, "p": 1.0}, 1500),
    "custext": ({"epsilon": 2.0, "top_k": 5}, 1500),
    "custext_plus": ({"epsilon": 2.0, "top_k": 5}, 1500),
    "dx_stencil": ({"eta": 5.0}, 400),
    "stencil": ({}, 200),
}


def _require(name):
    if name not in get_registry().entries["mechanism"]:
        pytest.skip(f"built-in mechanism {name!r} is not registered")


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_built_in_mechanism_does_not_fail(name):
    _require(name)
    params, samples = BUILT_INS[name]
    report = audit(name, params, samples=samples, seed=0, registry=get_registry())
    assert report.verdict is not Verdict.FAIL, report.one_line()


@pytest.mark.parametrize("name", ["santext", "custext"])
def test_exact_strategy_is_used_and_trusted(name):
    _require(name)
    report = audit(name, BUILT_INS[name][0], samples=1000, seed=1, registry=get_registry())
    assert report.verdict is Verdict.PASS, report.one_line()
    assert report.checks["sampler_matches_declared_law"] is True
    assert any(f.strategy == "exact output probabilities" for f in report.findings)


def test_no_guarantee_is_reported_as_infinite_epsilon():
    _require("stencil")
    report = audit("stencil", {}, samples=200, registry=get_registry())
    assert report.verdict is Verdict.PASS and "ε = ∞" in report.guarantee
    assert report.samples_drawn == 0


def test_santext_plus_with_keep_probability_declares_nothing_to_refute():
    _require("santext_plus")
    report = audit("santext_plus", {"epsilon": 2.0, "p": 0.3}, samples=200, registry=get_registry())
    assert "ε = ∞" in report.guarantee
