"""CusText and CusText+ (Chen et al. 2023): customised top-K output sets + exponential mechanism."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, ClassVar

import dpkit
from dpkit import KAnonymityGuarantee, VocabIndex, process_cache, stop_word_mask
from dpkit_baselines.params import CusTextParams
from dpkit_baselines.sampling import frequency_rank, gumbel_argmax

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # imported on first use: dpkit validate needs guarantee() only


_SETS = process_cache("custext.output_sets", "CusText output sets per (space, K, stop-word "
                      "policy, frequency order)", max_entries=16)


def build_groups(table: torch.Tensor, order: torch.Tensor, k: int,
                 eligible: torch.Tensor | None = None, shortlist: int = 16) -> torch.Tensor:
    """Greedy partition of the vocabulary into output sets of size k (CusText's mapping).

    Walking ``order`` (most frequent first), the next unassigned word and its k − 1 nearest
    unassigned words (L2) form one set; the last set may be smaller. Returns the set id ``[V]``
    of each word (−1 for words not ``eligible``). The ``shortlist``·k nearest words of every word
    come from one batched search; a full distance row is computed only when the shortlist has
    fewer than k free words left, so the result equals the plain greedy.
    """
    V = table.shape[0]
    group = torch.full((V,), -1, dtype=torch.long, device=table.device)
    free = torch.ones(V, dtype=torch.bool, device=table.device)
    if eligible is not None:
        free &= eligible
    near = VocabIndex(table).search(table, min(V, shortlist * k))[1]
    sq = (table * table).sum(1)
    n_groups = 0
    for seed in order[free[order]].tolist():
        if not free[seed]:
            continue
        candidates = near[seed][free[near[seed]]]
        if len(candidates) >= k and candidates[0] == seed:
            members = candidates[:k]
        else:
            dist = sq - 2.0 * (table @ table[seed])
            dist[~free] = torch.inf
            dist[seed] = -torch.inf
            members = dist.topk(min(k, int(free.sum())), largest=False).indices
        group[members] = n_groups
        free[members] = False
        n_groups += 1
    return group


def member_table(group: torch.Tensor, k: int) -> torch.Tensor:
    """``[n_sets, k]`` member ids of each output set, padded with −1."""
    ids = torch.nonzero(group >= 0).squeeze(1)
    g = group[ids]
    order = torch.argsort(g, stable=True)
    ids, g = ids[order], g[order]
    n_sets = int(g.max()) + 1 if len(g) else 0
    starts = torch.searchsorted(g, torch.arange(n_sets, device=g.device))
    slot = torch.arange(len(g), device=g.device) - starts[g]
    table = torch.full((n_sets, k), -1, dtype=torch.long, device=g.device)
    table[g, slot] = ids
    return table


class CusText(dpkit.Component):
    """CusText: each word is replaced within its fixed output set of K similar words by an
    exponential mechanism on min-max-normalised similarity, P(y | x) ∝ exp(ε·u(x, y) / 2)."""

    name: ClassVar[str] = "custext"
    domain: ClassVar[str] = "token"
    label: ClassVar[str] = "CusText"
    keep_stop_words: ClassVar[bool] = False

    Params = CusTextParams

    def __init__(self, params: CusTextParams):
        super().__init__(params)
        self.counts: torch.Tensor | None = None
        self._cache: tuple[str, torch.Tensor, torch.Tensor] | None = None

    def fit_counts(self, counts: torch.Tensor) -> None:
        """Word counts ``[V]`` that order the greedy set construction (most frequent first)."""
        self.counts = counts
        self._cache = None

    def groups(self, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Output-set id ``[V]`` of every word (−1: kept verbatim, the stop words of CusText+)."""
        return self._sets(space)[0]

    def _sets(self, space: dpkit.EmbeddingSpace) -> tuple[torch.Tensor, torch.Tensor]:
        if self._cache is None or self._cache[0] != space.fingerprint:
            order = frequency_rank(space, self.counts)
            key = (space.fingerprint, self.params.top_k, self.keep_stop_words,
                   hashlib.sha256(order.cpu().numpy().tobytes()).hexdigest())
            def build() -> tuple[torch.Tensor, torch.Tensor]:
                eligible = ~stop_word_mask(space) if self.keep_stop_words else None
                group = build_groups(space.vectors.float(), order, self.params.top_k, eligible)
                return group, member_table(group, self.params.top_k)

            self._cache = (space.fingerprint, *_SETS.get_or_build(key, build))
        return self._cache[1], self._cache[2]

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> KAnonymityGuarantee:
        """(K, ε): ε-DP among the words of one output set; sets are disjoint, so nothing across them.

        Needs ``space`` to report the achieved k (smallest set; 1 for verbatim stop words).
        """
        if space is None:
            raise ValueError(f"{self.name}.guarantee needs the space to report the achieved k")
        group = self.groups(space)
        sizes = torch.bincount(group[group >= 0])
        per_word = torch.where(group >= 0, sizes[group.clamp_min(0)], 1)
        below = float((per_word < self.params.top_k).double().mean())
        return KAnonymityGuarantee(self.params.top_k, int(per_word.min()), below,
                                   self.params.epsilon)

    def verbatim_mask(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[n]`` mask of words released unchanged: those without an output set (CusText+'s stop
        words). They have no guarantee; the runner records ε = ∞ for them."""
        group = self.groups(space).to(ids.device)
        return (ids >= 0) & (group[ids.clamp_min(0)] < 0)

    def output_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Exact ``[n, V]`` output log-probabilities for ids ``[n]``."""
        ids = ids.to(space.vectors.device)
        group, members = (t.to(ids.device) for t in self._sets(space))  # the cache may sit elsewhere
        out = torch.full((len(ids), space.size), -torch.inf, dtype=torch.float64, device=ids.device)
        verbatim = group[ids] < 0
        out[verbatim, ids[verbatim]] = 0.0
        rows = torch.nonzero(~verbatim).squeeze(1)
        if len(rows):
            cand, logits = self._set_logits(ids[rows], space, group, members)
            keep = cand >= 0
            out[rows.unsqueeze(1).expand_as(cand)[keep], cand[keep]] = torch.log_softmax(
                logits, dim=1)[keep]
        return out

    def _set_logits(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace, group: torch.Tensor,
                    members: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output sets ``[n, K]`` (−1 padded) of ids ``[n]`` and their float64 logits, from exact
        differences: the sampler and :meth:`output_log_probs` share these numbers."""
        cand = members[group[ids]]
        valid = cand >= 0
        table = space.vectors.double()
        dist = (table[cand.clamp_min(0)] - table[ids].unsqueeze(1)).norm(dim=-1)
        lo = torch.where(valid, dist, torch.inf).min(1, keepdim=True).values
        hi = torch.where(valid, dist, -torch.inf).max(1, keepdim=True).values
        utility = 1.0 - (dist - lo) / (hi - lo).clamp_min(1e-12)
        return cand, torch.where(valid, 0.5 * self.params.epsilon * utility, -torch.inf)

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                  generator: torch.Generator) -> torch.Tensor:
        """Substitute ids for ids ``x`` ``[n]`` (−1 and verbatim words pass through)."""
        if space is None:
            raise ValueError(f"{self.name} needs the embedding space (space=...)")
        device = space.vectors.device
        x = x.to(device)
        group, members = (t.to(device) for t in self._sets(space))  # the cache may sit elsewhere
        out = x.clone()
        rows = torch.nonzero((x >= 0) & (group[x.clamp_min(0)] >= 0)).squeeze(1)
        if len(rows):
            cand, logits = self._set_logits(x[rows], space, group, members)
            pick = gumbel_argmax(logits, generator)
            out[rows] = cand.gather(1, pick.unsqueeze(1)).squeeze(1)
        return out


class CusTextPlus(CusText):
    """CusText+: CusText that leaves stop words unchanged (they get no protection: k = 1)."""

    name: ClassVar[str] = "custext_plus"
    label: ClassVar[str] = "CusText+"
    keep_stop_words: ClassVar[bool] = True
