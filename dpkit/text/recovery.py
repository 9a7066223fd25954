"""Nearest-neighbour recovery of token ids from vectors: candidates, hit rates, Pr@k.

The measurement behind every inversion attack and every defense that reports how many tokens a
nearest-neighbour search recovers (split-learning uploads, noisy embeddings).
"""

from __future__ import annotations

import torch

from dpkit.text.search import VocabIndex


def knn_candidates(queries: torch.Tensor, table: torch.Tensor, k: int,
                   metric: str = "l2") -> torch.Tensor:
    """Ids ``[N, k]`` of the k nearest table rows of each query (nearest first)."""
    return VocabIndex(table, metric).search(queries, k)[1]


def hit_rates(candidates: torch.Tensor, truth: torch.Tensor, ks: tuple[int, ...]) -> dict[int, float]:
    """Share of rows whose true id is among their first k candidates, per k (``truth < 0``: not
    scored; nan when no row is scored)."""
    truth = truth.to(candidates.device)
    scored = truth >= 0
    if not bool(scored.any()):
        return {k: float("nan") for k in ks}
    hit_rank = (candidates[scored] == truth[scored].unsqueeze(1)).long()
    return {k: float(hit_rank[:, :k].any(1).float().mean()) for k in ks}


def knn_recovery(queries: torch.Tensor, table: torch.Tensor, truth: torch.Tensor,
                 ks: tuple[int, ...] = (1, 5), metric: str = "l2") -> dict[int, float]:
    """Share of rows whose true id ``truth`` is among the k nearest table rows of the query, per k.

    Rows with ``truth < 0`` (out of vocabulary) are not scored. Returns ``{k: rate}``.
    """
    if queries.shape[0] != truth.shape[0]:
        raise ValueError(f"{queries.shape[0]} queries but {truth.shape[0]} true ids; they must align")
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    index = VocabIndex(table, metric)
    truth = truth.to(index.device)
    scored = truth >= 0
    if not bool(scored.any()):
        return {k: float("nan") for k in ks}
    _, ids = index.search(queries[scored.to(queries.device)], max(ks))
    hit_rank = (ids == truth[scored].unsqueeze(1)).long()
    return {k: float(hit_rank[:, :k].any(1).float().mean()) for k in ks}
