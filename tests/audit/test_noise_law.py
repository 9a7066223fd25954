"""The white-box noise laws (dpkit.audit.noise_law): which η a guarantee implies, and p-values
that are exactly the documented tests (Bonferroni over two), capped at 1, defined on edge cases."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import stats

from dpkit.accounting.guarantees import DpGuarantee, MetricDpGuarantee
from dpkit.audit.noise_law import (declared_laplace_eta, exposed_noise, gaussian_pvalue,
                                   laplace_l2_pvalue, laplace_pvalue, reference_laplace_l2,
                                   simulated_power)


def _mech(guarantee, clip_bound=None, contribution=None):
    mech = SimpleNamespace(params=SimpleNamespace(clip_bound=clip_bound),
                           guarantee=lambda space: guarantee if space == "space" else None)
    if contribution is not None:
        mech.noise_contribution = lambda: contribution
    return mech


def test_declared_eta_is_the_guarantees_per_token_or_per_contribution():
    assert declared_laplace_eta(_mech(MetricDpGuarantee(4.0)), "space") == 4.0
    assert declared_laplace_eta(_mech(MetricDpGuarantee(4.0, unit="sequence"), contribution=2.0),
                                "space") == 2.0  # each token's noise carries η / its contribution
    assert declared_laplace_eta(_mech(MetricDpGuarantee(4.0, unit="sequence")), "space") is None
    assert declared_laplace_eta(_mech(MetricDpGuarantee(4.0), clip_bound=1.0), "space") is None
    assert declared_laplace_eta(_mech(MetricDpGuarantee(4.0, metric="cosine")), "space") is None
    assert declared_laplace_eta(_mech(DpGuarantee(1.0, 0.0)), "space") is None
    bare = SimpleNamespace(guarantee=lambda space: MetricDpGuarantee(3.0))  # no params at all
    assert declared_laplace_eta(bare, "space") == 3.0


def test_exposed_noise_is_drawn_from_the_generator_given():
    from dpkit.contract.plugins import get_registry
    from dpkit.testing.toy import ToySpace

    mech = get_registry().build("mechanism", "laplace_dx", {"eta": 5.0})
    space = ToySpace(ToySpace.Params()).load(torch.device("cpu"))
    x = space.vectors[:3]
    one = exposed_noise(mech, x, space, torch.Generator().manual_seed(1))
    assert one.dtype == torch.float64 and one.shape == x.shape
    assert torch.equal(one, exposed_noise(mech, x, space, torch.Generator().manual_seed(1)))


def _quantile_sample(n: int, d: int, eta: float) -> np.ndarray:
    """Rows whose radii are the Gamma(d, 1/η) quantiles and whose directions are evenly spread:
    a sample as close to the law as n rows get (every KS p-value near 1)."""
    radius = stats.gamma(a=d, scale=1 / eta).ppf((np.arange(n) + 0.5) / n)
    angle = np.random.default_rng(0).permutation(2 * np.pi * (np.arange(n) + 0.5) / n)
    return np.stack([np.cos(angle), np.sin(angle)], 1) * radius[:, None]


def test_laplace_l2_pvalue_is_the_bonferroni_of_its_two_ks_tests():
    z = reference_laplace_l2(np.random.default_rng(1), 300, 3, 2.0)
    radius = np.linalg.norm(z, axis=1)
    p_r = stats.kstest(radius, stats.gamma(a=3, scale=0.5).cdf).pvalue
    p_u = stats.kstest((z[:, 0] / radius + 1) / 2, stats.beta(1, 1).cdf).pvalue
    assert laplace_l2_pvalue(z, 2.0) == pytest.approx(min(1.0, 2 * min(p_r, p_u)), rel=1e-12)
    assert laplace_l2_pvalue(_quantile_sample(400, 2, 3.0), 3.0) == 1.0  # capped at 1
    assert laplace_l2_pvalue(np.zeros((0, 3)), 2.0) == 1.0
    small = reference_laplace_l2(np.random.default_rng(2), 2000, 4, 50.0)  # radii far below 1
    assert laplace_l2_pvalue(small, 50.0) > 1e-3


def test_laplace_l2_pvalue_in_one_dimension_tests_the_sign():
    rng = np.random.default_rng(3)
    z = reference_laplace_l2(rng, 2000, 1, 2.0)
    assert laplace_l2_pvalue(z, 2.0) > 1e-3
    p_r = stats.kstest(np.abs(z[:, 0]), stats.gamma(a=1, scale=0.5).cdf).pvalue
    p_s = stats.binomtest(int((z[:, 0] > 0).sum()), 2000, 0.5).pvalue
    assert laplace_l2_pvalue(z, 2.0) == pytest.approx(min(1.0, 2 * min(p_r, p_s)), rel=1e-12)
    assert laplace_l2_pvalue(np.abs(z), 2.0) < 1e-6  # right radius, always positive
    skewed = np.where(rng.uniform(size=(2000, 1)) < 0.6, np.abs(z), -np.abs(z))
    assert laplace_l2_pvalue(skewed, 2.0) < 1e-3  # a 60/40 sign


def test_gaussian_pvalue_is_the_bonferroni_of_variance_and_mean():
    rng = np.random.default_rng(4)
    # a mean of 0.15σ (the mean test decides), then a scale of 1.15σ (the variance test decides)
    for x in (rng.normal(0.3, 2.0, 500), rng.normal(0.0, 2.3, 500)):
        chi, z = float(((x / 2) ** 2).sum()), abs(float((x / 2).sum())) / math.sqrt(500)
        p_var = 2 * min(stats.chi2.cdf(chi, 500), stats.chi2.sf(chi, 500))
        p_mean = 2 * stats.norm.sf(z)
        assert 2 * min(p_var, p_mean) < 0.1
        assert gaussian_pvalue(x, 2.0) == pytest.approx(2 * min(p_var, p_mean), rel=1e-12)
    assert gaussian_pvalue(np.array([100.0]), 1.0) < 1e-6  # one value can already be impossible
    shifted = np.random.default_rng(5).normal(0.2, 1.0, 2000)  # a mean of σ/5, variance ≈ right
    assert gaussian_pvalue(shifted, 1.0) < 1e-6
    even = stats.norm.ppf((np.arange(1000) + 0.5) / 1000)  # mean 0, variance ≈ 1
    assert gaussian_pvalue(even, 1.0) == 1.0
    assert gaussian_pvalue(np.zeros(0), 1.0) == 1.0


def test_laplace_pvalue_edges():
    assert laplace_pvalue(np.zeros(0), 1.0) == 1.0
    x = np.random.default_rng(6).laplace(0, [0.5, 2.0], (1000, 2))
    assert laplace_pvalue(x, np.tile([0.5, 2.0], 1000)) > 1e-3  # a scale per value


def test_simulated_power_is_the_share_rejected_strictly_below_the_level():
    def uniform(rng):
        return rng.uniform(size=1)

    expected_rng = np.random.default_rng(0)
    expected = np.mean([expected_rng.uniform(size=1)[0] < 0.3 for _ in range(200)])
    assert simulated_power(lambda z: float(z[0]), uniform, 0.3) == expected
    at_level = simulated_power(lambda z: 0.5 if z[0] < 0.5 else 1.0, uniform, 0.5)
    assert at_level == 0.0  # p = level is not a rejection
