"""dχ Laplace noise: radius ~ Gamma(d, 1/η), uniform direction on the sphere, exact density."""

import numpy as np
import pytest
import torch
from scipy import stats

from dpkit.text.noise import laplace_log_density, sample_laplace_noise


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


def test_bad_eta_is_refused_with_its_value():
    with pytest.raises(ValueError, match="inf"):
        sample_laplace_noise(2, 3, float("inf"), gen())


@pytest.mark.parametrize("eta", [0.0, -1.0, float("nan")])
def test_zero_negative_and_nan_eta_are_refused(eta):
    with pytest.raises(ValueError, match="eta"):
        sample_laplace_noise(2, 3, eta, gen())


@pytest.mark.parametrize("d", [1, 3, 5, 50])
def test_log_density_is_normalised_in_every_dimension(d):
    """∫ p = |S^{d−1}|·∫ r^{d−1} p(x + r·e₁ | x) dr = 1, read off the density along one axis
    (a normalising constant off by Γ(d) or Γ(d/2) fails for d ≠ 1, 2)."""
    from scipy import integrate, special

    eta = 2.5
    x = torch.full((1, d), 0.7, dtype=torch.float64)

    def radial(r: float) -> float:
        y = x.clone()
        y[0, 0] += r
        return r ** (d - 1) * float(laplace_log_density(x, y, eta).exp())

    sphere = 2 * np.pi ** (d / 2) / special.gamma(d / 2)
    mass = sphere * integrate.quad(radial, 0, 60 / eta + 5 * d / eta, limit=200)[0]
    assert abs(mass - 1.0) < 1e-6


def test_log_density_depends_on_the_difference_and_takes_single_rows():
    """log p(y | x) = log p(y − x | 0) for rows and for 1-D vectors (the last axis is the space)."""
    g = gen(4)
    x, y = torch.randn(7, 4, generator=g) * 3, torch.randn(7, 4, generator=g)
    rows = laplace_log_density(x, y, 1.7)
    assert torch.allclose(rows, laplace_log_density(torch.zeros_like(x), y - x, 1.7))
    single = torch.stack([laplace_log_density(x[i], y[i], 1.7) for i in range(7)])
    assert single.shape == (7,) and torch.allclose(single, rows)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_noise_stays_on_the_generators_device():
    """Without ``device``, the draws are made on the generator's device (CUDA here)."""
    z = sample_laplace_noise(64, 3, 2.0, torch.Generator(device="cuda").manual_seed(0))
    assert z.device.type == "cuda"
