"""Confidence bounds for the auditor: Clopper–Pearson intervals, ε lower bounds from events."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def clopper_pearson_lower(successes: np.ndarray | int, trials: int, alpha: float) -> np.ndarray:
    """One-sided lower Clopper–Pearson bound on a binomial proportion at level ``alpha``."""
    k = np.asarray(successes, dtype=float)
    safe_k = np.where(k > 0, k, 1.0)
    lower = stats.beta.ppf(alpha, safe_k, trials - safe_k + 1)
    return np.where(k > 0, lower, 0.0)


def clopper_pearson_upper(successes: np.ndarray | int, trials: int, alpha: float) -> np.ndarray:
    """One-sided upper Clopper–Pearson bound on a binomial proportion at level ``alpha``."""
    k = np.asarray(successes, dtype=float)
    safe_k = np.where(k < trials, k, trials - 1.0)
    upper = stats.beta.ppf(1 - alpha, safe_k + 1, trials - safe_k)
    return np.where(k < trials, upper, 1.0)


def epsilon_from_probabilities(p: np.ndarray, q: np.ndarray, delta: float) -> np.ndarray:
    """ε implied by P[E|x] = p and P[E|x'] = q under (ε, δ)-DP: log((p − δ) / q); −∞ if p ≤ δ."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.clip(p - delta, 0.0, None)) - np.log(q)
    out = np.where(p - delta <= 0, -np.inf, out)
    return np.where(np.isnan(out), -np.inf, out)


def epsilon_lower_bound(k_x: np.ndarray | int, k_xp: np.ndarray | int, n: int, alpha: float,
                        delta: float = 0.0) -> np.ndarray:
    """Lower confidence bound on ε from event counts ``k_x`` of ``n`` draws under x and ``k_xp``
    under x': holds with probability ≥ 1 − ``alpha`` (``alpha/2`` per side)."""
    p_lo = clopper_pearson_lower(k_x, n, alpha / 2)
    q_hi = clopper_pearson_upper(k_xp, n, alpha / 2)
    return epsilon_from_probabilities(p_lo, q_hi, delta)


def wilson_epsilon_lower_bound(k_x: np.ndarray, k_xp: np.ndarray, n: int, z: float = 1.96,
                               delta: float = 0.0) -> np.ndarray:
    """Fast approximate ε lower bound (Wilson score intervals), used to rank candidate events."""
    def bound(k: np.ndarray, sign: float) -> np.ndarray:
        p = np.asarray(k, dtype=float) / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        spread = np.clip(p * (1 - p), 0, None) / n + z * z / (4 * n * n)
        half = z * np.sqrt(spread) / (1 + z * z / n)
        return np.clip(centre + sign * half, 0.0, 1.0)

    return epsilon_from_probabilities(bound(k_x, -1.0), bound(k_xp, 1.0), delta)


def epsilon_point_estimate(k_x: np.ndarray | int, k_xp: np.ndarray | int, n: int,
                           delta: float = 0.0) -> np.ndarray:
    """Plug-in ε estimate from event counts (add-½ smoothing so empty events stay finite)."""
    p = (np.asarray(k_x, dtype=float) + 0.5) / (n + 1)
    q = (np.asarray(k_xp, dtype=float) + 0.5) / (n + 1)
    return epsilon_from_probabilities(p, q, delta)


def certifiable_epsilon(n: int, alpha: float, delta: float = 0.0) -> float:
    """The largest ε any event can certify with ``n`` draws per input (all in E under x, none
    under x'): claims above it can be neither refuted nor supported by this sample size."""
    return float(epsilon_lower_bound(n, 0, n, alpha, delta))


def epsilon_at_delta(logp: np.ndarray, logq: np.ndarray, delta: float) -> float:
    """Exact smallest ε with Σ_y max(0, p(y) − e^ε q(y)) ≤ δ for two discrete laws (log-probs)."""
    logp = np.asarray(logp, dtype=float)
    logq = np.asarray(logq, dtype=float)
    support = np.isfinite(logp)
    if delta <= 0:
        ratio = logp[support] - logq[support]
        return float(ratio.max()) if ratio.size else -math.inf
    p = np.exp(logp)

    def excess(eps: float) -> float:
        return float(np.clip(p - np.exp(eps + logq), 0, None).sum())

    if excess(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while excess(hi) > delta:
        hi *= 2
        if hi > 1e4:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > delta else (lo, mid)
    return hi


def hoeffding_lower(mean: float, n: int, alpha: float) -> float:
    """Lower confidence bound on the mean of ``n`` i.i.d. values in [0, 1] (Hoeffding)."""
    return mean - math.sqrt(math.log(1 / alpha) / (2 * n))
