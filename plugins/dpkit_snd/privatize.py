"""Client-side privatization of token embeddings with a registered dχ mechanism (Eq. 2–3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def measured_clip_bound(table: torch.Tensor) -> float:
    """C = max_t ||x_t|| over the embedding table (Eq. 3), measured rather than assumed."""
    return float(table.norm(dim=-1).max())


@dataclass
class PrivateTokens:
    """Privatized token embeddings X̃, the noise actually applied Z = X̃ − X, and the mask."""

    x_priv: torch.Tensor
    noise: torch.Tensor
    mask: torch.Tensor

    @property
    def n_tokens(self) -> int:
        """Number of privatized (non-padding) tokens."""
        return int(self.mask.sum())


def privatize_tokens(mechanism, x: torch.Tensor, mask: torch.Tensor, *, space,
                     generator: torch.Generator) -> PrivateTokens:
    """Noise (and clip, if the mechanism is built with a clip bound) every real token of ``x``.

    ``x`` is ``[B, n, d]``; padding positions keep their public clean embedding and zero noise
    (the server masks them). Z is recomputed from the clipped output, as the paper prescribes.
    """
    keep = mask.bool()
    noisy = mechanism.privatize(x[keep], space=space, generator=generator)
    x_priv = x.clone()
    x_priv[keep] = noisy.to(x.dtype)
    return PrivateTokens(x_priv, x_priv - x, mask)


def choose_group(eta: float, groups: list[list[float]]) -> int:
    """Index of the η group (App. A.5.3) for ``eta``: the group whose range, in log η, is nearest
    (η = ∞: the group with the largest η)."""
    if not groups:
        raise ValueError("no eta groups given; pass eta_groups such as [[50, 100], [200, 400]]")
    if math.isinf(eta):  # no noise: the group of the least noise
        return max(range(len(groups)), key=lambda i: (max(groups[i]), -i))
    log_eta = math.log(eta)

    def gap(group: list[float]) -> float:
        lo, hi = math.log(min(group)), math.log(max(group))
        return max(lo - log_eta, 0.0, log_eta - hi)

    return min(range(len(groups)), key=lambda i: (gap(groups[i]), i))


def token_correlation(x: torch.Tensor, x_priv: torch.Tensor) -> float:
    """Pearson correlation of clean and privatized coordinates (the grouping criterion of A.5.3)."""
    a = x.flatten().double()
    b = x_priv.flatten().double()
    a = a - a.mean()
    b = b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()).clamp_min(1e-12))
