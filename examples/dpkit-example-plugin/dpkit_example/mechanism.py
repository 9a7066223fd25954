"""The Gaussian mechanism on clipped token embeddings ((ε, δ)-DP per token)."""

from __future__ import annotations

import math

import dp_accounting
import torch

import dpkit
from dpkit import DpGuarantee
from dpkit_example.params import ClippedGaussianParams


class ClippedGaussian:
    """Clip each token embedding to L2 norm C, add N(0, (z·2C)²) noise per coordinate.

    Replacing one token moves its clipped vector by at most 2C (L2), so with noise multiplier z
    the release is the Gaussian mechanism of sensitivity 2C: ``GaussianDpEvent(z)`` per token.
    """

    name = "clipped_gaussian"
    domain = "embedding"

    Params = ClippedGaussianParams

    def __init__(self, params: ClippedGaussianParams):
        self.params = params

    @property
    def sigma(self) -> float:
        """Per-coordinate noise standard deviation: z·2C."""
        return self.params.noise_multiplier * 2 * self.params.clip

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> DpGuarantee:
        """Gaussian mechanism with the declared noise multiplier, per token."""
        event = dp_accounting.GaussianDpEvent(self.params.noise_multiplier)
        return DpGuarantee(event, f"Gaussian z={self.params.noise_multiplier} on embeddings "
                                  f"clipped to {self.params.clip} (sensitivity 2C), per token")

    def clip_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Scale rows whose L2 norm exceeds C back onto the ball of radius C."""
        norms = x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return x * (self.params.clip / norms).clamp(max=1.0)

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace | None,
                  generator: torch.Generator) -> torch.Tensor:
        """Noisy clipped embeddings ``[n, d]`` (batched; no loop over tokens)."""
        noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        return self.clip_rows(x) + self.sigma * noise

    def log_density(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Exact ``log p(y | x)`` per row (for the auditor)."""
        d = x.shape[-1]
        sq = ((y - self.clip_rows(x)) ** 2).sum(dim=-1)
        return -sq / (2 * self.sigma**2) - d * math.log(self.sigma * math.sqrt(2 * math.pi))
