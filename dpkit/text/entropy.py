"""Kozachenko–Leonenko k-NN entropy and the mutual information of an additive noise mechanism.

From "Sample estimate of the entropy of a random vector", Kozachenko and Leonenko, Problems of
Information Transmission (1987); used as in "Split-and-Denoise", Mai et al., ICML 2024 (App. A.6).
"""

from __future__ import annotations

import math

import torch

from dpkit.text.search import VocabIndex


def knn_distances(samples: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Distance ``[N]`` of each sample to its k-th nearest other sample (Euclidean)."""
    n = samples.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must lie in [1, {n - 1}] for {n} samples, got {k}")
    index = VocabIndex(samples.float(), "l2")
    self_ids = torch.arange(n, device=index.device)
    return index.search(samples, k, exclude=self_ids)[0][:, k - 1]


def kl_entropy(samples: torch.Tensor, k: int = 3) -> float:
    """Kozachenko–Leonenko estimate of the differential entropy (nats) of ``samples`` ``[N, d]``.

    Ĥ = ψ(N) − ψ(k) + log c_d + (d/N) Σᵢ log εᵢ, with c_d the volume of the unit d-ball and εᵢ the
    distance to the k-th neighbour.
    """
    n, d = samples.shape
    eps = knn_distances(samples, k).double().clamp_min(1e-300)
    log_cd = (d / 2) * math.log(math.pi) - math.lgamma(d / 2 + 1)
    return float(torch.special.digamma(torch.tensor(float(n), dtype=torch.float64))
                 - torch.special.digamma(torch.tensor(float(k), dtype=torch.float64))
                 + log_cd + d * eps.log().mean())


def kl_mutual_information(clean: torch.Tensor, noisy: torch.Tensor, k: int = 3) -> float:
    """I(X; X̃) = H(X̃) − H(Z) for additive noise Z = X̃ − X independent of X (SnD Eq. 20, 22), nats."""
    if clean.shape != noisy.shape:
        raise ValueError(f"clean {tuple(clean.shape)} and noisy {tuple(noisy.shape)} must match")
    return kl_entropy(noisy, k) - kl_entropy(noisy - clean, k)
