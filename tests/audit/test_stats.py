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
    epsilon_from_probabilities,
    epsilon_lower_bound,
    epsilon_point_estimate,
    hoeffding_lower,
    wilson_epsilon_lower_bound,
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


def test_clopper_pearson_at_one_success_and_one_failure():
    """k = 1 and k = n − 1 are ordinary counts: their bounds are scipy's, not the edge cases'."""
    for k, n in ((1, 50), (49, 50)):
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        assert clopper_pearson_lower(k, n, 0.05) == pytest.approx(ci.low, abs=1e-9)
        assert clopper_pearson_upper(k, n, 0.05) == pytest.approx(ci.high, abs=1e-9)
        assert 0 < ci.low < ci.high < 1


def test_epsilon_from_probabilities_is_the_dp_inequality_solved_for_epsilon():
    """P[E|x] ≤ e^ε P[E|x'] + δ, solved: ε = log((p − δ)/q); −∞ where p ≤ δ (the event proves
    nothing), +∞ where q = 0 < p − δ, and −∞ for an undefined probability."""
    rng = np.random.default_rng(3)
    p, q, delta = rng.uniform(0.2, 1, 50), rng.uniform(0.01, 1, 50), 0.1
    eps = epsilon_from_probabilities(p, q, delta)
    assert np.allclose(p, np.exp(eps) * q + delta)  # exactly on the boundary of (ε, δ)-DP
    assert epsilon_from_probabilities(0.04, 0.01, 0.05) == -math.inf
    assert epsilon_from_probabilities(0.05, 0.01, 0.05) == -math.inf
    assert epsilon_from_probabilities(0.3, 0.0, 0.05) == math.inf
    assert epsilon_from_probabilities(np.nan, 0.1, 0.0) == -math.inf


def test_certifiable_epsilon_with_delta_subtracts_it_from_the_lower_probability():
    n, alpha, delta = 1000, 0.05, 0.01
    all_in = clopper_pearson_lower(n, n, alpha / 2)
    none_in = clopper_pearson_upper(0, n, alpha / 2)
    assert certifiable_epsilon(n, alpha, delta) == pytest.approx(math.log((all_in - delta) / none_in))
    assert certifiable_epsilon(n, alpha, delta) < certifiable_epsilon(n, alpha)


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson's interval from its definition: the p with (k/n − p)² = z² p(1 − p)/n."""
    phat = k / n
    roots = np.roots([1 + z * z / n, -(2 * phat + z * z / n), phat * phat])
    return float(min(roots.real)), float(max(roots.real))


@pytest.mark.parametrize("kx,kxp,n,delta", [(300, 100, 1000, 0.0), (40, 3, 200, 0.0),
                                            (900, 20, 1000, 0.05), (7, 0, 50, 0.0)])
def test_wilson_bound_is_the_ratio_of_wilson_score_interval_ends(kx, kxp, n, delta):
    lo, _ = _wilson(kx, n, 1.96)
    _, hi = _wilson(kxp, n, 1.96)
    got = float(wilson_epsilon_lower_bound(np.array(kx), np.array(kxp), n, delta=delta))
    assert got == pytest.approx(math.log((lo - delta) / hi), rel=1e-9)
    assert got < float(epsilon_point_estimate(kx, kxp, n, delta))
    if delta == 0.0:  # the default δ is 0
        assert float(wilson_epsilon_lower_bound(np.array(kx), np.array(kxp), n)) == got
    wider = float(wilson_epsilon_lower_bound(np.array(kx), np.array(kxp), n, z=3.0, delta=delta))
    assert wider < got  # a higher confidence is a lower bound


def test_point_estimate_converges_and_stays_finite_on_empty_events():
    rng = np.random.default_rng(4)
    n, p, q = 200_000, 0.3, 0.1
    estimate = float(epsilon_point_estimate(rng.binomial(n, p), rng.binomial(n, q), n))
    assert estimate == pytest.approx(math.log(3), abs=0.02)
    with_delta = float(epsilon_point_estimate(rng.binomial(n, p), rng.binomial(n, q), n, 0.1))
    assert with_delta == pytest.approx(math.log(2), abs=0.03)
    assert float(epsilon_point_estimate(50, 0, 50)) == pytest.approx(math.log(101))


def _smallest_epsilon_brute(logp, logq, delta, grid=np.linspace(0, 25, 500_001)):
    p, q = np.exp(logp), np.exp(logq)
    excess = np.clip(p[None, :] - np.exp(grid)[:, None] * q[None, :], 0, None).sum(1)
    assert excess[-1] <= delta < excess[0]  # the grid brackets it
    return float(grid[np.argmax(excess <= delta)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_epsilon_at_delta_is_the_smallest_epsilon_within_delta(seed):
    rng = np.random.default_rng(seed)
    logp = np.log(rng.dirichlet(np.ones(6)))
    logq = np.log(rng.dirichlet(np.ones(6)) * 1e-3 + np.eye(6)[0] * (1 - 1e-3))
    for delta in (1e-3, 0.05):
        assert epsilon_at_delta(logp, logq, delta) == pytest.approx(
            _smallest_epsilon_brute(logp, logq, delta), abs=1e-4)


def test_epsilon_at_delta_edges():
    e5 = math.exp(5.0)  # randomized response at ε = 5: the bracket must grow past 2 and 4
    logp, logq = np.log([e5 / (1 + e5), 1 / (1 + e5)]), np.log([1 / (1 + e5), e5 / (1 + e5)])
    assert 4 < epsilon_at_delta(logp, logq, 1e-4) < 5
    even = np.log([0.5, 0.5])
    assert epsilon_at_delta(even, even, 0.01) == 0.0  # identical laws: ε = 0
    assert epsilon_at_delta(np.log([0.75, 0.25]), np.log([0.25, 0.75]), 0.5) == 0.0  # δ at ε = 0
    with_zero = np.array([math.log(0.5), math.log(0.5), -math.inf])
    assert epsilon_at_delta(with_zero, with_zero, 0.0) == 0.0  # an outcome neither law reaches
    assert epsilon_at_delta(np.log([0.5, 0.5]), np.array([0.0, -20000.0]), 0.0) == \
        pytest.approx(20000 + math.log(0.5))  # exact in log space, where e^-20000 underflows
    assert epsilon_at_delta(np.log([0.5, 0.5]), np.array([0.0, -math.inf]), 0.1) == math.inf
    assert epsilon_at_delta(np.array([-math.inf]), np.array([0.0]), 0.0) == -math.inf


def test_hoeffding_lower_is_the_bound_at_alpha_and_covers():
    n, alpha = 400, 0.05
    gap = 0.6 - hoeffding_lower(0.6, n, alpha)
    assert math.exp(-2 * n * gap * gap) == pytest.approx(alpha)  # Hoeffding's tail at the gap
    rng = np.random.default_rng(5)
    means = rng.binomial(n, 0.5, 20_000) / n
    assert np.mean([hoeffding_lower(m, n, alpha) > 0.5 for m in means]) <= alpha
