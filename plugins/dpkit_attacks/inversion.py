"""Nearest-neighbour inversion of noisy embeddings and recovery of substituted tokens (Pr@k)."""

from __future__ import annotations

from typing import ClassVar

import torch

from dpkit import (
    Component,
    EmbeddingSpace,
    ServerView,
    VocabIndex,
    hit_rates,
    knn_candidates,
)
from dpkit_attacks.params import KnnParams


def substitute_recovery(substituted: torch.Tensor, truth: torch.Tensor, space: EmbeddingSpace,
                        ks: tuple[int, ...] = (1, 5), metric: str = "l2") -> dict[int, float]:
    """Pr@k of dχ-STENCIL: the original is among the k nearest tokens of the substitute's vector."""
    device = space.vectors.device
    keep = (substituted >= 0) & (truth >= 0)
    subs, truth = substituted[keep].to(device), truth[keep].to(device)
    if len(subs) == 0:
        return {k: float("nan") for k in ks}
    uniq, inverse = torch.unique(subs, return_inverse=True)  # neighbours once per distinct substitute
    _, ids = VocabIndex(space.vectors, metric).search(space.vectors[uniq], max(ks))
    hits = ids[inverse] == truth.unsqueeze(1)
    return {k: float(hits[:, :k].any(1).float().mean()) for k in ks}


def substitute_candidates(substituted: torch.Tensor, space: EmbeddingSpace, k: int,
                          metric: str = "l2") -> torch.Tensor:
    """The k nearest tokens ``[N, k]`` of each substitute's vector, searched once per distinct
    substitute; rows of substitutes out of the vocabulary (``< 0``) are −1."""
    device = space.vectors.device
    substituted = substituted.to(device)
    out = torch.full((len(substituted), k), -1, dtype=torch.long, device=device)
    keep = substituted >= 0
    if bool(keep.any()):
        uniq, inverse = torch.unique(substituted[keep], return_inverse=True)
        _, ids = VocabIndex(space.vectors, metric).search(space.vectors[uniq], k)
        out[keep] = ids[inverse]
    return out


def _space_of(view: ServerView, attack: str) -> EmbeddingSpace:
    space = view.knowledge.get("space")
    if not isinstance(space, EmbeddingSpace):
        raise ValueError(f"{attack} needs view.knowledge['space'] (the public EmbeddingSpace); "
                         f"got {type(space).__name__}")
    return space


def _cap(n: int, cap: int | None) -> slice:
    return slice(0, n if cap is None else min(n, cap))


class NNInversion(Component):
    """Nearest-neighbour inversion: the attacker decodes each noisy embedding to its k nearest tokens."""

    name: ClassVar[str] = "nn_inversion"
    requires: ClassVar[tuple[str, ...]] = ("embeddings",)
    Params = KnnParams

    params: KnnParams

    def run(self, view: ServerView, ctx) -> torch.Tensor:
        """The k nearest tokens ``[N, max k]`` of each noisy vector (the first ``max_queries``)."""
        space = _space_of(view, self.name)
        noisy = view.observed["embeddings"]
        return knn_candidates(noisy[_cap(len(noisy), self.params.max_queries)], space.vectors,
                              max(self.params.ks), self.params.metric)

    def score(self, guesses: torch.Tensor, truth: dict) -> dict[str, float]:
        """``inversion_top{k}``: share of tokens whose true id is among the k nearest of the noisy vector."""
        rates = hit_rates(guesses, truth["token_ids"][:len(guesses)], tuple(self.params.ks))
        return {f"inversion_top{k}": v for k, v in rates.items()}


class TokenRecovery(Component):
    """Recovery of substituted tokens (dχ-STENCIL's Pr@k): is the original among the substitute's k NN?"""

    name: ClassVar[str] = "token_recovery"
    requires: ClassVar[tuple[str, ...]] = ("substituted_ids",)
    Params = KnnParams

    params: KnnParams

    def run(self, view: ServerView, ctx) -> torch.Tensor:
        """The k nearest tokens ``[N, max k]`` of each substitute's vector (−1 rows for a
        substitute out of the vocabulary)."""
        space = _space_of(view, self.name)
        subs = view.observed["substituted_ids"]
        return substitute_candidates(subs[_cap(len(subs), self.params.max_queries)], space,
                                     max(self.params.ks), self.params.metric)

    def score(self, guesses: torch.Tensor, truth: dict) -> dict[str, float]:
        """``recovery_at{k}``: Pr@k over the in-vocabulary tokens of the privatized text."""
        known = guesses[:, 0] >= 0
        ids = truth["token_ids"][:len(guesses)].to(guesses.device)
        rates = hit_rates(guesses, torch.where(known, ids, torch.full_like(ids, -1)),
                          tuple(self.params.ks))
        return {f"recovery_at{k}": v for k, v in rates.items()}
