"""EmbedCluster (ObfusLM Alg. 1) over a large vocabulary, without the V×V similarity matrix.

Alg. 1 visits rows in order; an unassigned row i opens a cluster and takes, in decreasing cosine
similarity, the not-yet-assigned rows whose similarity is at least γᵢ = quantile(D[i], β), until
the cluster has k members. Only the rows at or above γᵢ can ever join, so the top
m = n − ⌊β(n−1)⌋ similarities of each row (found by a chunked matmul + top-k) decide everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Clusters:
    """A partition of n rows: ``labels[i]`` is row i's cluster, ``members`` the padded index table."""

    labels: torch.Tensor   # [n] long
    members: torch.Tensor  # [C, k_max] long, -1 pads
    k_requested: int

    @property
    def sizes(self) -> torch.Tensor:
        """Size of each cluster ``[C]``."""
        return (self.members >= 0).sum(dim=1)

    @property
    def k_achieved(self) -> int:
        """Smallest anonymity set actually produced."""
        return int(self.sizes.min())

    @property
    def share_below_k(self) -> float:
        """Share of rows that sit in clusters smaller than the requested k."""
        sizes = self.sizes
        return float(sizes[sizes < self.k_requested].sum()) / int(self.labels.numel())

    def size_of_row(self) -> torch.Tensor:
        """Anonymity-set size of every row ``[n]``."""
        return self.sizes[self.labels]


def members_from_labels(labels: torch.Tensor, k_requested: int) -> Clusters:
    """Build the padded member table from per-row cluster labels (rows ordered by index)."""
    labels = labels.long().cpu()
    n_clusters = int(labels.max()) + 1
    order = torch.argsort(labels, stable=True)
    counts = torch.bincount(labels, minlength=n_clusters)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(labels.numel()) - starts[labels[order]]
    members = torch.full((n_clusters, int(counts.max())), -1, dtype=torch.long)
    members[labels[order], slot] = order
    return Clusters(labels, members, k_requested)


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x.float(), dim=1)


def topk_similar(x: torch.Tensor, m: int, beta: float, chunk_rows: int = 1024
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: top-``m`` cosine similarities, their indices and the β-quantile γ of the full row.

    Memory is ``chunk_rows × n`` floats at a time; the quantile uses linear interpolation over
    all n similarities (as ``torch.quantile``), read off the sorted top-m values. Where ties at γ
    put more than m similarities at or above it, every one of them is kept (the columns grow to
    the most any row needs; shorter rows are padded with −∞ and index −1), and equal similarities
    come in index order, as in Alg. 1's stable sort.
    """
    n = x.shape[0]
    pos = beta * (n - 1)
    lo = math.floor(pos)
    frac = pos - lo
    hi_rank, lo_rank = n - 1 - lo, n - 1 - min(lo + 1, n - 1)   # descending ranks of s[lo], s[lo+1]
    need = max(m, hi_rank + 1)
    unit = _unit_rows(x)
    vals_out, idx_out, gamma = [], [], []
    for start in range(0, n, chunk_rows):
        sims = unit[start:start + chunk_rows] @ unit.T
        vals, idx = torch.topk(sims, need, dim=1, sorted=True)
        g = vals[:, hi_rank] + frac * (vals[:, lo_rank] - vals[:, hi_rank])
        width = max(m, int((sims >= g.unsqueeze(1)).sum(1).max()))
        if width > need:
            vals, idx = torch.topk(sims, width, dim=1, sorted=True)
        del sims
        by_index = torch.argsort(idx[:, :width], dim=1)
        vals, idx = vals[:, :width].gather(1, by_index), idx[:, :width].gather(1, by_index)
        by_value = torch.sort(vals, dim=1, descending=True, stable=True).indices
        gamma.append(g)
        vals_out.append(vals.gather(1, by_value))
        idx_out.append(idx.gather(1, by_value))
    width = max(v.shape[1] for v in vals_out)
    vals = torch.cat([torch.nn.functional.pad(v, (0, width - v.shape[1]), value=-torch.inf)
                      for v in vals_out])
    idx = torch.cat([torch.nn.functional.pad(i, (0, width - i.shape[1]), value=-1) for i in idx_out])
    return vals, idx, torch.cat(gamma)


def quantile_rank(n: int, beta: float) -> int:
    """How many top similarities of a row can lie at or above its β-quantile (plus one for ties)."""
    return min(n, n - math.floor(beta * (n - 1)) + 1)


def greedy_assign(top_vals: torch.Tensor, top_idx: torch.Tensor, gamma: torch.Tensor,
                  k: int) -> torch.Tensor:
    """Alg. 1's sequential pass over precomputed candidates; returns cluster labels ``[n]``.

    The pass is inherently sequential (a row's cluster depends on every earlier cluster), so it
    loops over cluster openings on CPU numpy arrays; each step is vectorised over candidates.
    """
    vals = top_vals.cpu().numpy()
    idx = top_idx.cpu().numpy()
    eligible = vals >= gamma.cpu().numpy()[:, None]
    n = vals.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    assigned = np.zeros(n, dtype=bool)
    next_label = 0
    for i in range(n):
        if assigned[i]:
            continue
        cand = idx[i]
        ok = eligible[i] & ~assigned[cand] & (cand != i)
        chosen = cand[ok][: k - 1]
        labels[i] = next_label
        labels[chosen] = next_label
        assigned[i] = True
        assigned[chosen] = True
        next_label += 1
    return torch.from_numpy(labels)


def embed_cluster(x: torch.Tensor, k: int, beta: float, chunk_rows: int = 1024) -> Clusters:
    """EmbedCluster(X, k, β): clusters of at most k rows of ``x`` (rows visited in index order)."""
    if k < 1:
        raise ValueError(f"EmbedCluster: cluster size k must be ≥ 1, got {k}; use k ≥ 2 for anonymity")
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"EmbedCluster: threshold ratio beta must lie in [0, 1), got {beta}; "
                         "the paper uses 0.99")
    n = x.shape[0]
    m = quantile_rank(n, beta)
    vals, idx, gamma = topk_similar(x, m, beta, chunk_rows)
    return members_from_labels(greedy_assign(vals, idx, gamma, k), k)


def embed_cluster_dense(x: torch.Tensor, k: int, beta: float) -> Clusters:
    """Reference EmbedCluster with the full n×n matrix, a literal reading of Alg. 1 (small n only)."""
    unit = _unit_rows(x)
    sims = unit @ unit.T
    n = x.shape[0]
    labels = torch.full((n,), -1, dtype=torch.long)
    next_label = 0
    for i in range(n):
        if labels[i] >= 0:
            continue
        gamma = torch.quantile(sims[i], beta)
        labels[i] = next_label
        size = 1
        for j in torch.argsort(sims[i], descending=True, stable=True).tolist():
            if size == k or sims[i, j] < gamma:
                break
            if j == i or labels[j] >= 0:
                continue
            labels[j] = next_label
            size += 1
        next_label += 1
    return members_from_labels(labels, k)
