"""Statistics over seeds: Student-t summaries, one-sided paired tests, Holm's step-down correction."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from dpkit.base.lazy import lazy_import
from dpkit.ml.metrics import mean_over_seeds

if TYPE_CHECKING:
    from scipy import stats as st
else:
    st = lazy_import("scipy.stats")  # a spec's claims are checked (dpkit validate) without scipy

LEVEL = 0.95
# each one-sided test runs at (1 − LEVEL)/2, so that at a single point "holds" is exactly "the
# 95 % two-sided interval of the difference lies beyond the threshold"
ALPHA = 0.025


@dataclass(frozen=True)
class Summary:
    """Mean, sample sd and the two-sided Student-t confidence interval of n values."""

    mean: float
    sd: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def half_width(self) -> float:
        """Half the interval's width (``nan`` with fewer than two values)."""
        return (self.ci_high - self.ci_low) / 2

    def to_dict(self) -> dict:
        """Plain mapping (for CSV and JSON)."""
        return asdict(self)


def t_quantile(n: int, level: float = LEVEL) -> float:
    """The two-sided Student-t critical value for n values (n − 1 degrees of freedom)."""
    return float(st.t.ppf(1 - (1 - level) / 2, n - 1))


def summarize(values: list[float], level: float = LEVEL) -> Summary:
    """Summary of ``values``; sd and interval are ``nan`` below two values, ∞ means stay ∞."""
    n = len(values)
    if n == 0:
        raise ValueError("summarize needs at least one value")
    if not all(math.isfinite(v) for v in values):
        # order-independent: any NaN gives NaN; an unbounded ε on any seed keeps the mean
        # unbounded (never under-state)
        top = mean_over_seeds(values)
        return Summary(top, math.nan, top, top, n)
    if min(values) == max(values):  # exactly constant: no rounding residue in sd or the interval
        return Summary(values[0], math.nan, math.nan, math.nan, n) if n < 2 else \
            Summary(values[0], 0.0, values[0], values[0], n)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n, level) * sd / math.sqrt(n)
    return Summary(mean, sd, mean - half, mean + half, n)


def one_sided_p(diffs: list[float], threshold: float, greater: bool) -> float:
    """p-value of the one-sided t test of H0 "mean(diffs) ≤ threshold" (``greater``) or
    "mean(diffs) ≥ threshold" (not ``greater``); needs two values. Zero spread: 0 or 1 exactly."""
    n = len(diffs)
    if n < 2:
        raise ValueError(f"a paired test needs at least 2 seeds, got {n}")
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    if min(diffs) == max(diffs):
        mean, sd = diffs[0], 0.0
    beyond = mean - threshold if greater else threshold - mean
    if sd == 0:
        return 0.0 if beyond > 0 else 1.0
    t = beyond / (sd / math.sqrt(n))
    return float(st.t.sf(t, n - 1))


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given), capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
