"""The toy test double declares the guarantee its Gaussian noise actually gives."""

from __future__ import annotations

import dp_accounting
import torch

from dpkit.accounting import DpGuarantee
from dpkit.testing.toy import ToyNoise, ToySpace


def test_toy_noise_declares_the_gaussian_mechanism_at_the_space_diameter():
    space = ToySpace(ToySpace.Params()).load(torch.device("cpu"))
    noise = ToyNoise(ToyNoise.Params(eta=2.0))
    guarantee = noise.guarantee(space)
    assert isinstance(guarantee, DpGuarantee)
    assert isinstance(guarantee.event, dp_accounting.GaussianDpEvent)
    diameter = max(float((a - b).norm()) for a in space.vectors for b in space.vectors)
    # σ / Δ with σ = 1/η: the noise multiplier of the worst-case token replacement
    assert abs(guarantee.event.noise_multiplier - 0.5 / diameter) < 1e-5
