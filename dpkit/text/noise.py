"""Multivariate Laplace dχ noise: the sampler and exact log-density every dχ mechanism shares.

Density ∝ exp(−η‖z‖₂) in ``d`` dimensions; adding it to a point gives η·d₂-privacy. Plug-ins that
perturb embeddings (the built-in dχ mechanisms and third-party ones) draw from here so the
sampler that the property tests check is the one that runs.

torch is imported on first use (:func:`dpkit.lazy_import`), so a mechanism module importing these
names stays importable without it (``dpkit validate`` calls its ``guarantee(None)``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dpkit.base.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")


def sample_laplace_noise(n: int, d: int, eta: float, generator: torch.Generator,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """``[n, d]`` draws of density ∝ exp(−η‖z‖): radius ~ Gamma(d, 1/η) times a uniform unit direction.

    Gamma(d, 1) for integer d is the sum of d standard exponentials, drawn from ``generator`` (torch's
    own gamma sampler takes no generator). The direction is a normalised Gaussian: uniform on the
    sphere, not in the ball, and not one Gamma draw per coordinate.
    """
    if not (eta > 0 and math.isfinite(eta)):
        raise ValueError(f"eta must be a positive finite number, got {eta!r}")
    device = device or generator.device
    radius = torch.rand(n, d, generator=generator, device=device).neg_().log1p_().sum(1, keepdim=True)
    radius.div_(-eta)
    direction = torch.randn(n, d, generator=generator, device=device)
    direction.div_(direction.norm(dim=1, keepdim=True).clamp_min_(1e-30))
    return direction.mul_(radius)


def laplace_log_density(x: torch.Tensor, y: torch.Tensor, eta: float) -> torch.Tensor:
    """``log p(y | x)`` per row for density η^d Γ(d/2) / (2 π^{d/2} Γ(d)) · exp(−η‖y − x‖)."""
    d = x.shape[-1]
    log_norm = (d * math.log(eta) + math.lgamma(d / 2) - math.log(2.0) - (d / 2) * math.log(math.pi)
                - math.lgamma(d))
    return log_norm - eta * (y.double() - x.double()).norm(dim=-1)


def clip_norms(y: torch.Tensor, bound: float | None) -> torch.Tensor:
    """Scale rows of ``y`` whose L2 norm exceeds ``bound`` back onto the ball (None: unchanged)."""
    if bound is None:
        return y
    norms = y.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    return y * (bound / norms).clamp(max=1.0)

