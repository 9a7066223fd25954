"""Batched nearest-neighbour search over a vocabulary table (L2 or cosine).

Scores are a chunked matmul followed by a top-k: queries are processed ``query_chunk`` rows at a
time and, when the table is large, the vocabulary is split too and the running top-k merged, so peak
memory is bounded by ``max_block`` score entries whatever the number of queries. Everything stays on
the device of the table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dpkit.base.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # imported on first use: mechanism modules import this one

METRICS = ("l2", "cosine")


class VocabIndex:
    """An exact k-NN index over a ``[V, d]`` table; ``search`` returns distances and ids.

    ``metric="l2"`` ranks by Euclidean distance, ``"cosine"`` by cosine distance ``1 - cos``.
    ``max_block`` bounds the number of score entries materialised at once (default 2**23, 32 MiB
    in float32).
    """

    def __init__(self, table: torch.Tensor, metric: str = "l2", *, max_block: int = 2**23):
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}; use 'l2' or 'cosine'")
        if table.ndim != 2 or table.shape[0] == 0:
            raise ValueError(f"table must be a non-empty [V, d] matrix, got shape {tuple(table.shape)}")
        if max_block < 1:
            raise ValueError(f"max_block must be ≥ 1, got {max_block}")
        self.metric = metric
        self.max_block = int(max_block)
        table = table.float()
        if metric == "cosine":
            table = torch.nn.functional.normalize(table, dim=1)
        self.table = table.contiguous()
        # one GEMM gives the ranking score: [−2q, 1]·[t, ‖t‖²] = ‖t‖² − 2q·t (L2), [−q, 0]·[t, 0] (cosine)
        extra = (table * table).sum(1, keepdim=True) if metric == "l2" else torch.zeros(len(table), 1,
                                                                                          device=table.device)
        self.augmented = torch.cat([table, extra], 1).contiguous()

    @property
    def size(self) -> int:
        """Number of vectors V."""
        return int(self.table.shape[0])

    @property
    def device(self) -> torch.device:
        """Device the table lives on (queries are moved there)."""
        return self.table.device

    def _chunks(self, n: int) -> tuple[int, int]:
        vocab_chunk = min(self.size, self.max_block)
        query_chunk = max(1, min(n, self.max_block // vocab_chunk))
        return query_chunk, vocab_chunk

    def _scores(self, q_aug: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        """Smaller is nearer: ‖t‖² − 2 q·t for L2, −q·t for cosine (a plain GEMM, no bias pass)."""
        return q_aug @ self.augmented[lo:hi].T

    def _finish(self, best: torch.Tensor, best_ids: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Exact distances of the chosen rows (the expanded form loses precision at small distances)."""
        rows = self.table[best_ids]
        if self.metric == "l2":
            return (rows - q.unsqueeze(1)).norm(dim=-1)
        return 1.0 - (rows * q.unsqueeze(1)).sum(-1)

    def search(self, queries: torch.Tensor, k: int = 1,
               exclude: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Distances ``[n, k]`` (ascending) and ids ``[n, k]`` of the k nearest table rows.

        ``exclude``: ids ``[n]`` or ``[n, m]`` never returned for the matching query (−1 = none),
        e.g. the original token for "nearest other than itself".
        """
        if queries.ndim != 2 or queries.shape[1] != self.table.shape[1]:
            raise ValueError(f"queries must be [n, {self.table.shape[1]}], got {tuple(queries.shape)}")
        n = queries.shape[0]
        if exclude is not None:
            exclude = exclude.to(self.device).long()
            exclude = exclude.unsqueeze(1) if exclude.ndim == 1 else exclude
            if exclude.shape[0] != n:
                raise ValueError(f"exclude has {exclude.shape[0]} rows for {n} queries")
        limit = self.size - (0 if exclude is None else exclude.shape[1])
        if not 1 <= k <= limit:
            raise ValueError(f"k must lie in [1, {limit}] for a table of {self.size} rows, got {k}")
        dists = torch.empty(n, k, device=self.device)
        ids = torch.empty(n, k, dtype=torch.long, device=self.device)
        query_chunk, vocab_chunk = self._chunks(n)
        for start in range(0, n, query_chunk):
            q = queries[start:start + query_chunk].to(self.device, torch.float32)
            if self.metric == "cosine":
                q = torch.nn.functional.normalize(q, dim=1)
            ex = None if exclude is None else exclude[start:start + query_chunk]
            scale = -2.0 if self.metric == "l2" else -1.0
            q_aug = torch.cat([scale * q, torch.ones(len(q), 1, device=self.device)], 1)
            best, best_ids = self._search_chunk(q_aug, k, ex, vocab_chunk)
            dists[start:start + q.shape[0]] = self._finish(best, best_ids, q)
            ids[start:start + q.shape[0]] = best_ids
        return dists, ids

    def _search_chunk(self, q: torch.Tensor, k: int, exclude: torch.Tensor | None,
                      vocab_chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
        best: torch.Tensor | None = None
        best_ids: torch.Tensor | None = None
        for lo in range(0, self.size, vocab_chunk):
            hi = min(lo + vocab_chunk, self.size)
            scores = self._scores(q, lo, hi)
            if exclude is not None:
                local = exclude - lo
                inside = (local >= 0) & (local < hi - lo)
                rows = torch.arange(q.shape[0], device=self.device).unsqueeze(1).expand_as(local)
                scores[rows[inside], local[inside]] = math.inf
            kk = min(k, hi - lo)
            if kk == 1:
                vals, idx = scores.min(dim=1, keepdim=True)
            else:
                vals, idx = scores.topk(kk, dim=1, largest=False)
            idx = idx + lo
            if best is None:
                best, best_ids = vals, idx
            else:
                assert best_ids is not None
                merged = torch.cat([best, vals], 1)
                vals, pos = merged.topk(min(k, merged.shape[1]), dim=1, largest=False)
                best_ids = torch.cat([best_ids, idx], 1).gather(1, pos)
                best = vals
        assert best is not None and best_ids is not None  # the vocabulary is never empty
        return best, best_ids


def nearest(queries: torch.Tensor, table: torch.Tensor, k: int = 1, metric: str = "l2",
            exclude: torch.Tensor | None = None,
            max_block: int = 2**23) -> tuple[torch.Tensor, torch.Tensor]:
    """One-shot k-NN of ``queries`` ``[n, d]`` in ``table`` ``[V, d]``: (distances, ids), ``[n, k]``."""
    return VocabIndex(table, metric, max_block=max_block).search(queries, k, exclude)


def nearest_ids(queries: torch.Tensor, table: torch.Tensor, metric: str = "l2",
                exclude: torch.Tensor | None = None) -> torch.Tensor:
    """Ids ``[n]`` of the single nearest table row to each query."""
    return nearest(queries, table, 1, metric, exclude)[1][:, 0]


def brute_force(queries: torch.Tensor, table: torch.Tensor, k: int = 1,
                metric: str = "l2") -> tuple[torch.Tensor, torch.Tensor]:
    """Reference k-NN by full pairwise distances (cdist); for tests and small inputs only."""
    q, t = queries.double(), table.double()
    if metric == "cosine":
        q, t = torch.nn.functional.normalize(q, dim=1), torch.nn.functional.normalize(t, dim=1)
        d = 1.0 - q @ t.T
    else:
        d = torch.cdist(q, t)
    vals, ids = d.topk(k, dim=1, largest=False)
    return vals.float(), ids
