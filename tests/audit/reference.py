"""Reference-correct mechanisms written independently of the plug-ins, to test the auditor."""

from __future__ import annotations

import math
from typing import ClassVar

import dp_accounting
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import DpGuarantee, MetricDpGuarantee


def laplace_noise(n: int, d: int, eta: float, gen: torch.Generator, device) -> torch.Tensor:
    """Density ∝ exp(−η‖z‖): radius Gamma(d, 1/η) (sum of d exponentials), uniform direction."""
    u = torch.rand(n, d, generator=gen, device=device)
    radius = -torch.log1p(-u).sum(1, keepdim=True) / eta
    direction = torch.randn(n, d, generator=gen, device=device)
    return radius * direction / direction.norm(dim=1, keepdim=True)


def laplace_log_density(x: torch.Tensor, y: torch.Tensor, eta: float) -> torch.Tensor:
    """log of η^d Γ(d/2) / (2 π^{d/2} Γ(d)) · exp(−η‖y − x‖) per row."""
    d = x.shape[-1]
    norm = d * math.log(eta) + math.lgamma(d / 2) - math.log(2) - d / 2 * math.log(math.pi) \
        - math.lgamma(d)
    return norm - eta * (y.double() - x.double()).norm(dim=-1)


class RefLaplace:
    """Correct multivariate Laplace dχ."""

    name: ClassVar[str] = "ref_laplace"
    domain: ClassVar[str] = "embedding"

    class Params(dpkit.Params):
        """η > 0."""

        eta: float = Field(gt=0, allow_inf_nan=False)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """η-dχ per token."""
        return MetricDpGuarantee(self.params.eta, "l2", space.name if space else "", "token")

    def privatize(self, x, *, space=None, generator):
        """Noisy rows."""
        return x + laplace_noise(x.shape[0], x.shape[1], self.params.eta, generator,
                                 x.device).to(x.dtype)

    def log_density(self, x, y):
        """Exact log p(y | x)."""
        return laplace_log_density(x, y, self.params.eta)


class RefExponential:
    """Correct exponential mechanism P(y|x) ∝ exp(−ε‖x − y‖ / 2), ε·d metric DP."""

    name: ClassVar[str] = "ref_exponential"
    domain: ClassVar[str] = "token"

    class Params(dpkit.Params):
        """ε > 0."""

        epsilon: float = Field(gt=0, allow_inf_nan=False)

    factor: ClassVar[float] = 0.5

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """ε-dχ per token."""
        return MetricDpGuarantee(self.params.epsilon, "l2", space.name if space else "", "token")

    def output_log_probs(self, ids, space):
        """[n, V] log-probabilities."""
        table = space.vectors.double()
        scores = -self.factor * self.params.epsilon * torch.cdist(table[ids], table)
        return torch.log_softmax(scores, dim=1)

    def privatize(self, x, *, space, generator):
        """Sample from output_log_probs by Gumbel-max."""
        logits = self.output_log_probs(x, space)
        u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
        return (logits - torch.log(-torch.log(u.clamp_min(1e-300)))).argmax(1)


class RefGaussian:
    """Correct Gaussian mechanism with L2 sensitivity 1: (ε, δ)-DP as GaussianDpEvent(σ)."""

    name: ClassVar[str] = "ref_gaussian"
    domain: ClassVar[str] = "embedding"

    class Params(dpkit.Params):
        """σ > 0 (sensitivity 1)."""

        sigma: float = Field(gt=0, allow_inf_nan=False)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """GaussianDpEvent(σ)."""
        return DpGuarantee(dp_accounting.GaussianDpEvent(self.params.sigma))

    def privatize(self, x, *, space=None, generator):
        """x + N(0, σ²)."""
        return x + self.params.sigma * torch.randn(x.shape, generator=generator, device=x.device)

    def log_density(self, x, y):
        """Exact log p(y | x)."""
        d = x.shape[-1]
        s = self.params.sigma
        return -((y.double() - x.double()) ** 2).sum(-1) / (2 * s * s) \
            - d * math.log(s * math.sqrt(2 * math.pi))


class RefRandomizedResponse:
    """Correct black-box randomized response over the vocabulary (ε-DP, no log-probs exposed)."""

    name: ClassVar[str] = "ref_rr"
    domain: ClassVar[str] = "token"

    class Params(dpkit.Params):
        """ε > 0."""

        epsilon: float = Field(gt=0, allow_inf_nan=False)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """ε-DP for any two tokens (pure: LaplaceDpEvent(1/ε) has ε at δ ≥ 0)."""
        return DpGuarantee(dp_accounting.LaplaceDpEvent(1 / self.params.epsilon))

    def privatize(self, x, *, space, generator):
        """Keep with probability e^ε/(e^ε + V − 1), else a uniform other token."""
        v = space.size
        keep = math.exp(self.params.epsilon) / (math.exp(self.params.epsilon) + v - 1)
        coin = torch.rand(x.shape, generator=generator, device=x.device) < keep
        other = (x + 1 + torch.randint(v - 1, x.shape, generator=generator, device=x.device)) % v
        return torch.where(coin, x, other)


class GeneratedSpaceModel:
    """A model source that loads to a generated EmbeddingSpace (exercises ``--space``)."""

    name: ClassVar[str] = "audit_generated_space"

    class Params(dpkit.Params):
        """Vocabulary size and dimension."""

        vocab: int = Field(default=20, ge=2)
        dim: int = Field(default=3, ge=1)

    def __init__(self, params):
        self.params = params

    def load(self, device):
        """The space on ``device``."""
        from dpkit.audit import make_test_space
        return make_test_space(self.params.vocab, self.params.dim, seed=5).to(device)


MECHANISMS = (RefLaplace, RefExponential, RefGaussian, RefRandomizedResponse)


@dpkit.hookimpl
def dpkit_register_models(register):
    """Register the generated-space model."""
    register(GeneratedSpaceModel)


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register the reference mechanisms."""
    for cls in MECHANISMS:
        register(cls)
