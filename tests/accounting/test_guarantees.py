"""Guarantees refuse what no mechanism can promise, accept every boundary that is valid."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    DpGuarantee,
    KAnonymityGuarantee,
    Ledger,
    MetricDpGuarantee,
    NoGuarantee,
)


@pytest.mark.parametrize("epsilon", [0.0, 1e-300, 3.0])
def test_pure_and_approximate_accept_every_finite_epsilon_from_zero(epsilon):
    assert DpGuarantee.pure(epsilon).event.epsilon == epsilon
    assert DpGuarantee.approximate(epsilon, 0.0).event.epsilon == epsilon


def test_pure_and_approximate_keep_their_description_and_relation():
    assert DpGuarantee.pure(1.0).description == "" == DpGuarantee.approximate(1.0, 0.0).description
    assert DpGuarantee.pure(1.0, "rr").description == "rr"
    approx = DpGuarantee.approximate(1.0, 1e-6, "sparse vector", neighboring="replace_one")
    assert approx.description == "sparse vector"
    assert (approx.event.epsilon, approx.event.delta, approx.event.neighboring) \
        == (1.0, 1e-6, "replace_one")
    assert DpGuarantee.pure(1.0, neighboring="replace_one").event.neighboring == "replace_one"


def test_an_approximate_guarantee_stated_for_additions_counts_double_for_replacements():
    stated = Ledger(accountant="pld", neighboring="replace_one")
    stated.spend(DpGuarantee.approximate(1.0, 1e-7, neighboring="add_remove"), "release", count=4)
    doubled = Ledger(accountant="pld", neighboring="replace_one")
    doubled.spend(DpGuarantee.approximate(2.0, 1e-7), "release", count=4)
    assert stated.epsilon() == doubled.epsilon()


@pytest.mark.parametrize("delta", [1.0, -1e-9, math.nan])
def test_approximate_refuses_a_delta_outside_zero_one(delta):
    with pytest.raises(ValueError) as info:
        DpGuarantee.approximate(1.0, delta)
    assert str(info.value) == f"delta must lie in [0, 1), got {delta!r}"


@pytest.mark.parametrize("epsilon", [-1.0, -1e-300, math.inf, math.nan])
def test_an_epsilon_no_mechanism_can_promise_is_refused(epsilon):
    match = (r"epsilon must be a finite number ≥ 0, got .*; an unbounded release is "
             r"NoGuarantee\(reason\)")
    with pytest.raises(ValueError, match=match):
        DpGuarantee.pure(epsilon)
    with pytest.raises(ValueError, match=match):
        DpGuarantee.approximate(epsilon, 1e-6)


@pytest.mark.parametrize("eta", [0.0, -1.0, math.inf, math.nan])
def test_metric_dp_eta_must_be_positive_and_finite(eta):
    with pytest.raises(ValueError, match="metric-DP eta must be a positive finite number, got"):
        MetricDpGuarantee(eta)


def test_metric_dp_unit_is_named_with_its_meaning():
    assert MetricDpGuarantee(1.0).unit == "token" and MetricDpGuarantee(1.0).metric == "l2"
    assert MetricDpGuarantee(1.0, unit="sequence").unit == "sequence"
    with pytest.raises(ValueError) as info:
        MetricDpGuarantee(1.0, unit="word")
    assert str(info.value) == ("metric-DP unit must be one of ('token', 'sequence'), got 'word': "
                               "'token' covers one token per application, 'sequence' one document")


@settings(max_examples=40, deadline=None)
@given(eta=st.floats(1e-3, 1e3), distance=st.floats(0.0, 1e3))
def test_epsilon_at_is_eta_times_distance(eta, distance):
    assert MetricDpGuarantee(eta).epsilon_at(distance) == eta * distance


def test_epsilon_at_refuses_a_negative_distance():
    assert MetricDpGuarantee(2.0).epsilon_at(0.0) == 0.0
    with pytest.raises(ValueError, match="distance must be non-negative, got -0.5"):
        MetricDpGuarantee(2.0).epsilon_at(-0.5)


def test_k_anonymity_accepts_every_valid_boundary():
    g = KAnonymityGuarantee(1, 1, 0.0, 0.0)
    assert (g.k_requested, g.k_achieved, g.share_below_k, g.epsilon) == (1, 1, 0.0, 0.0)
    assert KAnonymityGuarantee(5, 2, 1.0, 2.0).share_below_k == 1.0


@pytest.mark.parametrize("args, match", [
    ((0, 1, 0.0, 1.0), r"k must be ≥ 1, got requested=0, achieved=1"),
    ((1, 0, 0.0, 1.0), r"k must be ≥ 1, got requested=1, achieved=0"),
    ((5, 5, -0.01, 1.0), r"share_below_k must lie in \[0, 1\], got -0.01"),
    ((5, 5, 1.01, 1.0), r"share_below_k must lie in \[0, 1\], got 1.01"),
    ((5, 5, math.nan, 1.0), r"share_below_k must lie in \[0, 1\], got nan"),
    ((5, 5, 0.0, -1.0), r"epsilon must be ≥ 0, got -1.0"),
    ((5, 5, 0.0, math.nan), r"epsilon must be ≥ 0, got nan"),
])
def test_k_anonymity_refuses_impossible_values(args, match):
    with pytest.raises(ValueError, match=match):
        KAnonymityGuarantee(*args)


def test_no_guarantee_needs_a_reason():
    assert NoGuarantee(" verbatim stop words ").reason == " verbatim stop words "
    assert NoGuarantee("x").epsilon == math.inf
    for blank in ("", "  \n"):
        with pytest.raises(ValueError) as info:
            NoGuarantee(blank)
        assert str(info.value) == "NoGuarantee needs a reason saying why no guarantee holds"
