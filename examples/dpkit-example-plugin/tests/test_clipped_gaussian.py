"""Tests of the example mechanism: dpkit's contract suite plus its own checks."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit import Ledger
from dpkit.testing import MechanismContract

ClippedGaussian = pytest.importorskip(
    "dpkit_example.mechanism", reason="pip install -e examples/dpkit-example-plugin").ClippedGaussian


class TestClippedGaussianContract(MechanismContract):
    """dpkit's shared checks: guarantee declared, params validated, seeded, audited."""

    mechanism = "clipped_gaussian"
    params = {"noise_multiplier": 1.0, "clip": 1.0}
    invalid_params = [{"noise_multiplier": 0}, {"clip": -1.0}, {"sigma": 1.0}]


def make(z=1.0, clip=1.0):
    return ClippedGaussian(ClippedGaussian.Params(noise_multiplier=z, clip=clip))


def test_sensitivity_is_twice_the_clip_bound():
    mech = make(clip=0.5)
    x = torch.tensor([[10.0, 0.0], [-3.0, 0.0]])
    clipped = mech.clip_rows(x)
    assert torch.allclose(clipped.norm(dim=1), torch.tensor([0.5, 0.5]))
    # the two extreme inputs are exactly 2C apart: the declared sensitivity is tight
    assert math.isclose(float((clipped[0] - clipped[1]).norm()), 2 * 0.5, rel_tol=1e-6)


def test_noise_scale_matches_the_declared_event():
    mech = make(z=2.0, clip=1.5)
    x = torch.zeros(50_000, 3)
    y = mech.privatize(x, space=None, generator=torch.Generator().manual_seed(0))
    assert abs(float(y.std()) / mech.sigma - 1) < 0.01
    assert mech.guarantee().event.noise_multiplier == 2.0


def test_ledger_epsilon_matches_gaussian_mechanism():
    ledger = Ledger(delta=1e-5)
    ledger.spend(make(z=1.0).guarantee(), "one token")
    # RDP bound of the Gaussian mechanism with z=1 at δ=1e-5 (dp-accounting 0.6.0)
    assert 4.0 < ledger.epsilon() < 5.5


def test_log_density_integrates_to_one_in_1d():
    mech = make(z=0.5, clip=1.0)
    ys = torch.linspace(-10, 10, 20001, dtype=torch.float64).unsqueeze(1)
    dens = mech.log_density(torch.full_like(ys, 3.0), ys).exp()
    assert abs(float(dens.sum()) * 20 / 20000 - 1) < 1e-3
