"""Confidence bounds: Clopper–Pearson agrees with scipy's exact interval and keeps its coverage."""

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.audit.stats import (
    certifiable_epsilon,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_at_delta,
    epsilon_lower_bound,
)


@pytest.mark.parametrize("k,n", [(0, 50), (3, 50), (25, 50), (50, 50), (917, 2000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    assert clopper_pearson_lower(k, n, 0.05) == pytest.approx(ci.low, abs=1e-9)
    assert clopper_pearson_upper(k, n, 0.05) == pytest.approx(ci.high, abs=1e-9)


def test_epsilon_lower_bound_false_alarm_rate_below_alpha():
    """Events at exactly the claimed ratio e^ε: the bound exceeds ε in ≤ α of repetitions."""
    rng = np.random.default_rng(0)
    eps, n, alpha, reps = 1.0, 1000, 0.1, 4000
    q = 0.05
    p = q * math.exp(eps)
    kx = rng.binomial(n, p, reps)
    kxp = rng.binomial(n, q, reps)
    rate = np.mean(epsilon_lower_bound(kx, kxp, n, alpha) > eps)
    assert rate <= alpha
    assert np.mean(epsilon_lower_bound(kx, kxp, n, alpha) > 0.3) > 0.5  # and it has power


def test_epsilon_at_delta_randomized_response():
    e = math.exp(1.0)
    logp = np.log([e / (1 + e), 1 / (1 + e)])
    logq = logp[::-1]
    assert epsilon_at_delta(logp, logq, 0.0) == pytest.approx(1.0)
    smaller = epsilon_at_delta(logp, logq, 0.05)
    assert 0 < smaller < 1.0
    p, q = np.exp(logp), np.exp(logq)
    assert np.clip(p - np.exp(smaller) * q, 0, None).sum() == pytest.approx(0.05, abs=1e-6)


def test_certifiable_epsilon_is_the_all_or_nothing_event():
    n, alpha = 1000, 0.05
    all_in = clopper_pearson_lower(n, n, alpha / 2)
    none_in = clopper_pearson_upper(0, n, alpha / 2)
    expected = math.log(all_in / none_in)
    assert certifiable_epsilon(n, alpha) == pytest.approx(expected)
    assert certifiable_epsilon(10 * n, alpha) > certifiable_epsilon(n, alpha) + 2
