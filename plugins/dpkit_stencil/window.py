"""Gaussian-weighted context windows of dχ-STENCIL (Algorithm 1) and their contribution bound."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

import dpkit

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # max_contribution (params, guarantee) needs no torch


def window_offsets(L: int, sigma: float) -> tuple[list[int], list[float]]:
    """Offsets and unnormalised weights of a window of L tokens.

    Odd L: offsets −(L−1)/2 … (L−1)/2, weight exp(−o²/2σ²), the largest on the token itself.
    Even L: offsets −(L/2 − 1) … L/2 centred between the token and its right neighbour,
    weight exp(−(o − ½)²/2σ²), so the token and that neighbour share the largest weight (§4).
    """
    if L < 1:
        raise ValueError(f"window size L must be ≥ 1, got {L}")
    if not sigma > 0:
        raise ValueError(f"window sigma must be > 0, got {sigma}")
    if L % 2:
        offsets, centre = list(range(-(L - 1) // 2, (L - 1) // 2 + 1)), 0.0
    else:
        offsets, centre = list(range(-(L // 2 - 1), L // 2 + 1)), 0.5
    return offsets, [math.exp(-((o - centre) ** 2) / (2 * sigma * sigma)) for o in offsets]


def window_mix(x: torch.Tensor, L: int, sigma: float) -> torch.Tensor:
    """Row i of the result is Σⱼ f_{i,j} xⱼ over the window of i, weights renormalised at the ends."""
    n = x.shape[0]
    offsets, weights = window_offsets(L, sigma)
    out = torch.zeros_like(x)
    total = torch.zeros(n, 1, dtype=x.dtype, device=x.device)
    for o, w in zip(offsets, weights):
        lo, hi = max(0, -o), min(n, n - o)
        if lo >= hi:
            continue
        out[lo:hi] += w * x[lo + o:hi + o]
        total[lo:hi] += w
    return out / total


def window_matrix(n: int, L: int, sigma: float) -> torch.Tensor:
    """The ``[n, n]`` row-normalised weight matrix f (row i: weights of the window of token i)."""
    return window_mix(torch.eye(n, dtype=torch.float64), L, sigma)


@lru_cache(maxsize=256)
def max_contribution(L: int, sigma: float) -> float:
    """maxⱼ Cⱼ = maxⱼ Σᵢ f_{i,j} over all sequence lengths (Lemma 1 proves ≤ 2).

    Columns farther than L from both ends sum to exactly 1, and for n ≥ 2L + 1 the two ends no
    longer interact, so lengths up to 3L + 2 cover every case. Pure Python (the column sums of
    :func:`window_matrix`, float64), so a spec's dχ-STENCIL guarantee is checked without torch.
    """
    offsets, weights = window_offsets(L, sigma)
    return max(max(column_sums(n, offsets, weights)) for n in range(1, 3 * L + 3))


def column_sums(n: int, offsets: list[int], weights: list[float]) -> list[float]:
    """Σᵢ f_{i,j} for each j of a sequence of n tokens (rows renormalised at the ends)."""
    sums = [0.0] * n
    for i in range(n):
        window = [(i + o, w) for o, w in zip(offsets, weights) if 0 <= i + o < n]
        total = math.fsum(w for _, w in window)
        for j, w in window:
            sums[j] += w / total
    return sums
