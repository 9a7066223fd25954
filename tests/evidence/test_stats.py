"""Seed statistics: Student-t intervals, one-sided paired tests, Holm's correction."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as hs
from scipy import stats

from dpkit.evidence.stats import holm, one_sided_p, summarize

finite = hs.floats(-1e3, 1e3, allow_nan=False)


@given(hs.lists(finite, min_size=2, max_size=12))
def test_summary_matches_scipy_t_interval(values):
    s = summarize(values)
    assert math.isclose(s.mean, float(np.mean(values)), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(s.sd, float(np.std(values, ddof=1)), rel_tol=1e-9, abs_tol=1e-9)
    if s.sd > 1e-9:
        low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values),
                                     scale=stats.sem(values))
        assert math.isclose(s.ci_low, low, rel_tol=1e-7, abs_tol=1e-7)
        assert math.isclose(s.ci_high, high, rel_tol=1e-7, abs_tol=1e-7)
    assert s.ci_low <= s.mean <= s.ci_high and s.n == len(values)


def test_one_value_has_no_interval_and_infinity_stays_infinite():
    one = summarize([0.7])
    assert one.mean == 0.7 and math.isnan(one.sd) and math.isnan(one.half_width)
    unbounded = summarize([1.0, math.inf])
    assert unbounded.mean == math.inf and unbounded.ci_high == math.inf


@given(hs.lists(finite, min_size=3, max_size=10), hs.floats(-5, 5))
def test_one_sided_p_matches_scipy(diffs, threshold):
    if float(np.std(diffs, ddof=1)) < 1e-6:
        return
    for greater, alt in ((True, "greater"), (False, "less")):
        ref = stats.ttest_1samp(diffs, threshold, alternative=alt).pvalue
        assert math.isclose(one_sided_p(diffs, threshold, greater), ref, rel_tol=1e-6,
                            abs_tol=1e-9)


def test_zero_spread_is_decided_by_the_sign():
    assert one_sided_p([2.0, 2.0, 2.0], 1.0, greater=True) == 0.0
    assert one_sided_p([2.0, 2.0, 2.0], 1.0, greater=False) == 1.0
    assert one_sided_p([1.0, 1.0], 1.0, greater=True) == 1.0


@given(hs.lists(hs.floats(0, 1), min_size=1, max_size=8))
def test_holm_is_bonferroni_step_down(pvalues):
    adjusted = holm(pvalues)
    m = len(pvalues)
    order = np.argsort(pvalues, kind="stable")
    for rank, i in enumerate(order):  # the definition, written independently
        expected = min(1.0, max((m - r) * pvalues[j] for r, j in enumerate(order[:rank + 1])))
        assert math.isclose(adjusted[i], expected, rel_tol=1e-12, abs_tol=1e-15)
    assert all(a >= p for a, p in zip(adjusted, pvalues))


def test_a_constant_metric_has_exactly_zero_spread_and_is_not_beyond_itself():
    s = summarize([0.1, 0.1, 0.1])  # fsum/3 rounds to 0.10000000000000002
    assert (s.mean, s.sd, s.half_width) == (0.1, 0.0, 0.0)
    assert one_sided_p([0.1, 0.1, 0.1], 0.1, greater=True) == 1.0
    assert one_sided_p([0.1, 0.1, 0.1], 0.1, greater=False) == 1.0
