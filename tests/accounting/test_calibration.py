"""Calibration: round trip within 1 %, never above the target, errors, sensitivity scaling."""

import math

import dp_accounting
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import calibrate_gaussian, calibrate_noise, dpsgd_event, epsilon_of
from dpkit.base.errors import AccountingError


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
