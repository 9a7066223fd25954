"""Laplace dχ: radius ~ Gamma(d, 1/η), isotropic unit direction, exact density, clipping."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.accounting import MetricDpGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit_baselines import LaplaceDx, Text2Text, sample_laplace_noise
from dpkit_baselines.laplace import laplace_log_density


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("d,eta", [(1, 2.0), (5, 0.5), (50, 10.0), (300, 25.0)])
def test_radius_is_gamma_d_scale_inverse_eta(d, eta):
    radius = sample_laplace_noise(4000, d, eta, gen(d)).norm(dim=1).double().numpy()
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / eta).cdf).pvalue > 1e-3


def test_ks_rejects_per_coordinate_gamma():
    """The SnD-code bug (one Gamma draw per coordinate) must fail the same radius test."""
    d, eta = 20, 2.0
    g = gen(3)
    u = torch.rand(4000, d, generator=g)
    per_coord = -torch.log1p(-u) / eta * torch.sign(torch.randn(4000, d, generator=g))
    radius = per_coord.norm(dim=1).double().numpy()
    assert stats.kstest(radius, stats.gamma(a=d, scale=1 / eta).cdf).pvalue < 1e-6


def test_direction_is_uniform_on_the_sphere():
    d = 6
    z = sample_laplace_noise(20000, d, 1.0, gen(1))
    u = z / z.norm(dim=1, keepdim=True)
    assert u.mean(0).abs().max() < 0.03
    cov = (u.T @ u) / len(u)
    assert torch.allclose(cov, torch.eye(d) / d, atol=0.01)
    # first coordinate of a uniform unit vector: (u1+1)/2 ~ Beta((d-1)/2, (d-1)/2)
    beta = stats.beta((d - 1) / 2, (d - 1) / 2)
    assert stats.kstest(((u[:, 0] + 1) / 2).double().numpy(), beta.cdf).pvalue > 1e-3


def test_log_density_integrates_to_one_in_2d():
    eta = 1.5
    grid = torch.linspace(-12, 12, 601, dtype=torch.float64)
    yy = torch.cartesian_prod(grid, grid)
    x = torch.tensor([[0.3, -0.2]], dtype=torch.float64).expand_as(yy)
    mass = laplace_log_density(x, yy, eta).exp().sum() * (grid[1] - grid[0]) ** 2
    assert abs(float(mass) - 1.0) < 1e-2


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 30), st.floats(0.01, 50), st.integers(0, 1000))
def test_log_ratio_within_eta_distance(d, eta, seed):
    g = gen(seed)
    x, x2, y = torch.randn(3, 1, d, generator=g).double() * 3
    mech = LaplaceDx(LaplaceDx.Params(eta=eta))
    ratio = mech.log_density(x, y) - mech.log_density(x2, y)
    assert float(ratio) <= eta * float((x - x2).norm()) + 1e-6


def test_privatize_shape_clip_and_guarantee():
    mech = LaplaceDx(LaplaceDx.Params(eta=0.1, clip_bound=2.0))
    x = torch.randn(7, 4)
    y = mech.privatize(x, generator=gen())
    assert y.shape == x.shape and float(y.norm(dim=1).max()) <= 2.0 + 1e-5
    space = random_space(10, 4, 0)
    assert mech.guarantee(space) == MetricDpGuarantee(0.1, "l2", space.name, "token")
    with pytest.raises(Exception, match="clip"):
        mech.log_density(x, y)


def test_same_generator_same_noise():
    mech = LaplaceDx(LaplaceDx.Params(eta=1.0))
    x = torch.zeros(5, 3)
    assert torch.equal(mech.privatize(x, generator=gen(4)), mech.privatize(x, generator=gen(4)))


def test_text2text_large_eta_keeps_tokens_small_eta_changes_them():
    space = random_space(50, 8, 2)
    ids = torch.tensor([3, -1, 7, 49])
    keep = Text2Text(Text2Text.Params(eta=1e6)).privatize(ids, space=space, generator=gen())
    assert keep.tolist() == ids.tolist()
    many = torch.arange(50).repeat(20)
    noisy = Text2Text(Text2Text.Params(eta=0.05)).privatize(many, space=space, generator=gen())
    assert float((noisy == many).float().mean()) < 0.3
    assert Text2Text(Text2Text.Params(eta=2.0)).guarantee(space).eta == 2.0


def test_params_reject_bad_eta():
    with pytest.raises(Exception):
        LaplaceDx.Params(eta=0)
    with pytest.raises(Exception):
        LaplaceDx.Params(eta=math.inf)
