"""Calibration: round trip within 1 %, never above the target, errors, sensitivity scaling."""

import math

import dp_accounting
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_accounting import NeighboringRelation
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import calibrate_gaussian, calibrate_noise, dpsgd_event, epsilon_of
from dpkit.accounting.calibration import LOWER_SIGMA, MAX_HALVINGS, _bracket
from dpkit.base.errors import AccountingError

REPLACE = NeighboringRelation.REPLACE_ONE


class Bounded:
    """ε(σ) = c/σ that fails the test after ``limit`` evaluations instead of searching forever."""

    def __init__(self, c, limit=500):
        self.c, self.limit, self.calls = c, limit, 0

    def __call__(self, sigma):
        self.calls += 1
        assert self.calls <= self.limit, f"no bracket after {self.limit} evaluations"
        return self.c / sigma


@pytest.mark.parametrize("target", [0.5, 1000.0, 2000.0])
def test_bracket_search_ends(target):
    """Doubling up, walking down to the floor (ε(floor) = target included): a bounded search."""
    _bracket(Bounded(1.0), target, 1.0, 1e-3)


def test_bracket_walks_down_to_a_zero_floor_and_stops():
    """An ε met at every σ: halving from 1 reaches 0 in fewer than ``MAX_HALVINGS`` steps."""
    assert _bracket(lambda sigma: 0.0, 1.0, 1.0, 0.0) == 0.0


def test_bracket_that_never_reaches_its_floor_is_refused_not_searched_forever():
    calls = []

    def counted(sigma):
        calls.append(sigma)
        return 0.0

    with pytest.raises(AccountingError, match="no bracket for ε=1 between σ=-1 and 1; the event's ε"):
        _bracket(counted, 1.0, 1.0, -1.0)
    assert len(calls) == MAX_HALVINGS + 1  # one up, then each halving once


def test_bracket_brackets_the_target():
    lo, hi = _bracket(Bounded(1.0), 3.0, 1.0, 1e-3)
    assert 1.0 / lo > 3.0 >= 1.0 / hi
    assert hi == 2 * lo


@settings(max_examples=8, deadline=None)
@given(target=st.floats(0.2, 8.0), q=st.sampled_from([1.0, 0.05, 0.01]),
       steps=st.integers(1, 200), delta=st.sampled_from([1e-5, 1e-6]))
def test_gaussian_round_trip_within_one_percent_never_above(target, q, steps, delta):
    sigma = calibrate_gaussian(target, delta, sampling_rate=q, steps=steps)
    achieved = epsilon_of(dpsgd_event(sigma, q, steps), delta)
    assert achieved <= target
    assert achieved >= 0.99 * target


def test_composition_of_two_mechanisms():
    """PATE-style: threshold checks at σ and answers at σ/√2 (vote histogram sensitivity √2)."""
    def event(sigma):
        return dp_accounting.ComposedDpEvent([
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), 100),
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma / math.sqrt(2)), 40)])
    sigma = calibrate_noise(event, 2.0, 1e-5)
    assert 0.99 * 2.0 <= epsilon_of(event(sigma), 1e-5) <= 2.0


def test_pld_matches_analytic_gaussian_and_rdp_is_conservative():
    """One Gaussian release: PLD is (near) exact, RDP needs more noise; neither exceeds ε."""
    exact = dp_accounting.get_sigma_gaussian(1.0, 1e-5)
    pld = calibrate_gaussian(1.0, 1e-5, accountant="pld")
    rdp = calibrate_gaussian(1.0, 1e-5)
    assert pld == pytest.approx(exact, rel=1e-2) and pld < rdp
    assert epsilon_of(dp_accounting.GaussianDpEvent(pld), 1e-5, "pld") <= 1.0
    assert dp_accounting.get_epsilon_gaussian(rdp, 1e-5) < 1.0


def test_sensitivity_scales_noise():
    base = calibrate_gaussian(4.0, 1e-5)
    assert calibrate_gaussian(4.0, 1e-5, sensitivity=3.0) == pytest.approx(3 * base, rel=1e-12)
    assert epsilon_of(dp_accounting.GaussianDpEvent(base), 1e-5) <= 4.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(target_epsilon=0.0, delta=1e-5), "target epsilon"),
    (dict(target_epsilon=math.inf, delta=1e-5), "target epsilon"),
    (dict(target_epsilon=1.0, delta=0.0), "delta"),
    (dict(target_epsilon=1.0, delta=1e-5, sampling_rate=1.5), "sampling rate"),
    (dict(target_epsilon=1.0, delta=1e-5, steps=0), "steps"),
    (dict(target_epsilon=1.0, delta=1e-5, sensitivity=-1.0), "sensitivity"),
    (dict(target_epsilon=1.0, delta=1e-5, accountant="moments"), "unknown accountant"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(AccountingError, match=match):
        calibrate_gaussian(**kwargs)


def test_delta_of_one_is_refused():
    with pytest.raises(AccountingError, match=r"delta must lie in \(0, 1\) for calibration, got 1.0"):
        calibrate_gaussian(1.0, 1.0)


@pytest.mark.parametrize("sensitivity", [0.0, math.inf, math.nan])
def test_a_sensitivity_that_is_not_positive_and_finite_is_refused(sensitivity):
    with pytest.raises(AccountingError, match="sensitivity must be a positive finite number, got"):
        calibrate_gaussian(1.0, 1e-5, sensitivity=sensitivity)


@pytest.mark.parametrize("target", [20.0, 200.0])
def test_a_loose_target_walks_the_bracket_below_sigma_one(target):
    sigma = calibrate_gaussian(target, 1e-5)
    assert sigma < 1.0
    achieved = epsilon_of(dp_accounting.GaussianDpEvent(sigma), 1e-5)
    assert 0.99 * target <= achieved <= target


def test_a_target_met_at_the_smallest_sigma_searched_returns_it():
    sigma = calibrate_gaussian(1e9, 1e-5)
    assert sigma == LOWER_SIGMA["rdp"]
    assert epsilon_of(dp_accounting.GaussianDpEvent(sigma), 1e-5) <= 1e9


def test_the_ledgers_orders_neighbours_and_discretisation_are_calibrated_for():
    orders = [8.0, 32.0]
    sigma = calibrate_gaussian(1.0, 1e-5, steps=10, orders=orders)
    reference = RdpAccountant(orders=orders).compose(dp_accounting.GaussianDpEvent(sigma), 10)
    assert 0.99 <= reference.get_epsilon(1e-5) <= 1.0
    sigma = calibrate_gaussian(1.0, 1e-5, sampling_rate=0.1, steps=50, accountant="pld",
                               discretization=5e-2)
    reference = PLDAccountant(value_discretization_interval=5e-2).compose(
        dpsgd_event(sigma, 0.1, 50))
    assert 0.99 <= reference.get_epsilon(1e-5) <= 1.0
    for accountant, fresh in (("rdp", RdpAccountant), ("pld", PLDAccountant)):
        scale = calibrate_noise(randomized_response, 1.0, 1e-5, accountant, neighboring="replace_one")
        reference = fresh(neighboring_relation=REPLACE).compose(randomized_response(scale))
        assert 0.99 <= reference.get_epsilon(1e-5) <= 1.0, accountant


def randomized_response(scale: float) -> dp_accounting.DpEvent:
    """k-ary randomized response, more private as ``scale`` grows; stated for replacements only."""
    return dp_accounting.RandomizedResponseDpEvent(noise_parameter=scale / (1 + scale), num_buckets=4)


def test_an_event_no_accountant_composes_is_refused_as_calibration():
    with pytest.raises(AccountingError, match=r"^calibration: the RDP accountant \(add_remove "
                                              r"neighbours\) cannot compose RandomizedResponse"):
        calibrate_noise(randomized_response, 1.0, 1e-5)


def test_pld_search_starts_from_the_rdp_sigma():
    """RDP's ε bounds PLD's from above: the RDP σ (same tolerance, same neighbours) is tried first."""
    tried = []

    def gaussians(sigma):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), 5)

    for make, neighboring in ((gaussians, "add_remove"), (gaussians, "replace_one"),
                              (randomized_response, "replace_one")):
        def event(sigma, make=make):
            tried.append(sigma)
            return make(sigma)

        rdp = calibrate_noise(event, 1.0, 1e-5, tol=1e-3, neighboring=neighboring)
        tried.clear()
        pld = calibrate_noise(event, 1.0, 1e-5, "pld", tol=1e-3, neighboring=neighboring)
        assert rdp in tried, (make, neighboring)
        assert epsilon_of(make(pld), 1e-5, "pld", neighboring=neighboring) <= 1.0


def test_a_coarser_tolerance_costs_fewer_evaluations():
    tried = []
    counts = {}
    for tol in (1e-1, 1e-9):
        tried.clear()
        calibrate_noise(lambda s: tried.append(s) or dp_accounting.GaussianDpEvent(s), 1.0, 1e-5,
                        tol=tol)
        counts[tol] = len(tried)
    assert counts[1e-1] < counts[1e-9]


def test_a_sigma_only_buildable_on_the_doubling_grid_is_refused_clearly():
    def on_grid(sigma):
        if not math.log2(sigma).is_integer():
            raise ValueError(f"no table for σ={sigma}")
        return dp_accounting.GaussianDpEvent(sigma)

    with pytest.raises(AccountingError, match=r"^could not calibrate σ for ε=1, δ=1e-05 with rdp: "
                                              r".*; check the event and the target$"):
        calibrate_noise(on_grid, 1.0, 1e-5)


def test_an_event_whose_epsilon_never_decreases_is_refused_after_a_bounded_search():
    tried = []
    with pytest.raises(AccountingError) as info:
        calibrate_noise(lambda s: tried.append(s) or dp_accounting.GaussianDpEvent(1.0), 0.5, 1e-5)
    assert max(tried) == 2.0**59  # 60 doublings of the start σ = 1
    assert str(info.value) == (f"no σ up to {2.0**60:g} reaches ε=0.5; the event's ε may not "
                               "decrease with σ")


def exact_sigma(event, target, delta):
    """The smallest σ with RDP ε ≤ target, to 1e-13 (bisection on dp-accounting's ε)."""
    lo, hi = 0.1, 100.0
    while hi - lo > 1e-13:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if epsilon_of(event(mid), delta) <= target else (mid, hi)
    return hi


@pytest.mark.parametrize("gap", [0.5e-4, 5e-4, 2e-3])
def test_a_calibrator_that_undershoots_is_nudged_up_by_doubling_steps(monkeypatch, gap):
    """Should dp-accounting return a σ a little below the root, the σ returned still meets ε,
    above the root by less than the gap plus one tolerance (steps tol, 2·tol, 4·tol, …)."""
    def event(sigma):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), 3)

    root = exact_sigma(event, 1.0, 1e-5)
    monkeypatch.setattr(dp_accounting, "calibrate_dp_mechanism", lambda *a, **k: root - gap)
    sigma = calibrate_noise(event, 1.0, 1e-5, tol=1e-4)
    assert epsilon_of(event(sigma), 1e-5) <= 1.0
    assert root <= sigma < root + gap + 1e-4


def test_a_sigma_whose_epsilon_equals_the_target_is_kept(monkeypatch):
    event = dp_accounting.GaussianDpEvent
    target = epsilon_of(event(2.5), 1e-5)
    monkeypatch.setattr(dp_accounting, "calibrate_dp_mechanism", lambda *a, **k: 2.5)
    assert calibrate_noise(event, target, 1e-5) == 2.5


def test_nudging_gives_up_on_an_event_whose_epsilon_does_not_decrease(monkeypatch):
    def on_grid_only(sigma):  # private only at σ = 2^k
        good = math.log2(sigma).is_integer()
        return dp_accounting.GaussianDpEvent(sigma if good else 1e-2)

    monkeypatch.setattr(dp_accounting, "calibrate_dp_mechanism", lambda *a, **k: 1.5)
    with pytest.raises(AccountingError, match=r"^calibrated σ=.* still exceeds ε=1; the event's ε "
                                              r"may not decrease with σ$"):
        calibrate_noise(on_grid_only, 1.0, 1e-5)


class Curve:
    """ε(σ) = c/σ, counting its evaluations."""

    def __init__(self, c):
        self.c, self.calls = c, []

    def __call__(self, sigma):
        self.calls.append(sigma)
        return self.c / sigma


@pytest.mark.parametrize("c, target, start, floor", [
    (3.0, 1.0, 1.0, 1e-3), (1.0, 2.0, 1.0, 1e-3), (5.0, 1.0, 0.75, 1e-3), (1.0, 10.0, 1.0, 1e-3),
    (2.0 / 3e-3, 1.0, 3e-3, 1e-3), (1.5e-3, 1.0, 1.5e-3, 1e-3), (1.0, 1000.0, 1.5e-3, 2e-2)])
def test_bracket_is_one_doubling_wide_around_the_root(c, target, start, floor):
    """(lo, hi) = (hi/2, hi) on the grid start·2^k, ε(lo) > target ≥ ε(hi) strictly."""
    lo, hi = _bracket(Curve(c), target, start, floor)
    assert c / lo > target >= c / hi
    assert hi == 2 * lo and math.log2(hi / start).is_integer()


def test_bracket_returns_the_floor_when_it_meets_the_target():
    assert _bracket(Curve(1.0), 2000.0, 1.0, 1e-3) == 1e-3
    assert _bracket(Curve(1.0), 1000.0, 1.0, 1e-3) == 1e-3  # ε(floor) = target exactly
