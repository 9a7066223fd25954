"""Kozachenko–Leonenko k-NN entropy and the mutual information of a noise mechanism (SnD App. A.6)."""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from pydantic import Field

from dpkit.contract.component import Component
from dpkit.contract.params import Params
from dpkit.contract.protocols import ServerView
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


class MutualInformationParams(Params):
    """k of the k-NN estimator and how many token vectors to use."""

    k: int = Field(default=3, ge=1, le=100)
    max_samples: int = Field(default=5000, ge=10, description="use at most this many vectors")


class MutualInformation(Component):
    """Mutual information between clean and privatized token embeddings (k-NN estimate, nats)."""

    name: ClassVar[str] = "mutual_information"
    requires: ClassVar[tuple[str, ...]] = ("embeddings",)
    Params = MutualInformationParams

    params: MutualInformationParams

    def run(self, view: ServerView, ctx) -> dict[str, torch.Tensor | None]:
        """What the measurement needs from the view: the noisy vectors and the public table."""
        space = view.knowledge.get("space")
        return {"noisy": view.observed["embeddings"],
                "table": None if space is None else space.vectors}

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """``mutual_information``: needs ``truth['embeddings']`` (clean) or the table + true ids."""
        noisy = guesses["noisy"]
        clean = truth.get("embeddings")
        if clean is None:
            ids = truth["token_ids"].to(noisy.device)
            keep = ids >= 0
            clean = guesses["table"].to(noisy.device)[ids[keep]]
            noisy = noisy[keep]
        n = min(len(noisy), self.params.max_samples)
        return {"mutual_information": kl_mutual_information(clean[:n].float(), noisy[:n].float(),
                                                            self.params.k)}
