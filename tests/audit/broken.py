"""Deliberately broken mechanisms: each declares more privacy than it gives; the audit must FAIL."""

from __future__ import annotations

from typing import ClassVar

import dp_accounting
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import DpGuarantee

from reference import RefExponential, RefLaplace, laplace_log_density, laplace_noise


class HalfScaleLaplace(RefLaplace):
    """Declares η-dχ (and the η density) but samples with 2η: half the declared noise scale."""

    name: ClassVar[str] = "broken_half_scale_laplace"

    def privatize(self, x, *, space=None, generator):
        """Noise of scale 1/(2η)."""
        return x + laplace_noise(x.shape[0], x.shape[1], 2 * self.params.eta, generator,
                                 x.device).to(x.dtype)


class PerCoordinateGamma(RefLaplace):
    """One Gamma(d, 1/η) draw per coordinate with a random sign (the SnD-code sampler), declared
    — with the L2 Laplace density — as L2 η-dχ; its per-coordinate density vanishes at 0."""

    name: ClassVar[str] = "broken_per_coordinate_gamma"

    def privatize(self, x, *, space=None, generator):
        """Independent ±Gamma(d, 1/η) noise per coordinate."""
        n, d = x.shape
        u = torch.rand(n, d, d, generator=generator, device=x.device)
        magnitude = -torch.log1p(-u).sum(2) / self.params.eta
        sign = torch.randint(2, (n, d), generator=generator, device=x.device) * 2 - 1
        return x + (magnitude * sign).to(x.dtype)

    def log_density(self, x, y):
        """The density it believes it samples (the correct L2 Laplace)."""
        return laplace_log_density(x, y, self.params.eta)


class ExponentialNoHalf(RefExponential):
    """Exponential mechanism with the factor 1/2 dropped, still declared ε·d metric DP."""

    name: ClassVar[str] = "broken_exponential_no_half"
    factor: ClassVar[float] = 1.0


class NoiselessThreshold:
    """A deterministic threshold on private vote counts declared as Confident-GNMax DP."""

    name: ClassVar[str] = "broken_noiseless_threshold"
    domain: ClassVar[str] = "embedding"

    class Params(dpkit.Params):
        """σ of the noisy threshold it claims to use, and the threshold."""

        sigma: float = Field(default=4.0, gt=0)
        threshold: float = 0.0

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """Claims the noisy threshold's GaussianDpEvent(σ)."""
        return DpGuarantee(dp_accounting.GaussianDpEvent(self.params.sigma), "noisy threshold")

    def privatize(self, x, *, space=None, generator):
        """1 where the count passes the threshold — no noise."""
        return (x >= self.params.threshold).to(x.dtype)


class IdentitySubstitution:
    """Returns the input token with probability 1, declared ε-DP."""

    name: ClassVar[str] = "broken_identity_substitution"
    domain: ClassVar[str] = "token"

    class Params(dpkit.Params):
        """ε it claims."""

        epsilon: float = Field(default=1.0, gt=0)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """Claims ε-DP."""
        return DpGuarantee(dp_accounting.LaplaceDpEvent(1 / self.params.epsilon))

    def privatize(self, x, *, space, generator):
        """The input itself."""
        return x.clone()


BROKEN = {
    "broken_half_scale_laplace": {"eta": 2.0},
    "broken_per_coordinate_gamma": {"eta": 2.0},
    "broken_exponential_no_half": {"epsilon": 1.0},
    "broken_noiseless_threshold": {"sigma": 4.0},
    "broken_identity_substitution": {"epsilon": 1.0},
}
MECHANISMS = (HalfScaleLaplace, PerCoordinateGamma, ExponentialNoHalf, NoiselessThreshold,
              IdentitySubstitution)


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register the broken mechanisms."""
    for cls in MECHANISMS:
        register(cls)
