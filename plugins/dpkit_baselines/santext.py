"""SanText and SanText+ (Yue et al. 2021): exponential mechanism over the vocabulary."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import dpkit
from dpkit import Guarantee, MetricDpGuarantee, NoGuarantee
from dpkit_baselines.params import SanTextParams, SanTextPlusParams
from dpkit_baselines.sampling import exact_pairwise_l2, frequency_rank, sample_by_id

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # imported on first use: dpkit validate needs guarantee() only


class SanText(dpkit.Component):
    """SanText: replace token x by y with P(y | x) ∝ exp(−ε·‖E[x] − E[y]‖ / 2) over the vocabulary."""

    name: ClassVar[str] = "santext"
    domain: ClassVar[str] = "token"
    label: ClassVar[str] = "SanText"

    Params = SanTextParams

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> Guarantee:
        """ε-dχ per token for the L2 distance (log-ratio ≤ ε·d: ε/2 from the score, ε/2 from Z)."""
        return MetricDpGuarantee(self.params.epsilon, "l2", space.name if space else "", "token")

    def output_mask(self, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[V]`` mask of the tokens the mechanism may output (all of them for SanText)."""
        return torch.ones(space.size, dtype=torch.bool, device=space.vectors.device)

    def sampling_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[n, V]`` log-probabilities of the exponential-mechanism draw for known ids ``[n]``."""
        table = space.vectors
        logits = -0.5 * self.params.epsilon * exact_pairwise_l2(table[ids], table)
        logits[:, ~self.output_mask(space)] = -torch.inf
        return torch.log_softmax(logits, dim=1)

    def output_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Exact ``[n, V]`` output log-probabilities of the whole mechanism for ids ``[n]``."""
        return self.sampling_log_probs(ids.to(space.vectors.device), space)

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                  generator: torch.Generator) -> torch.Tensor:
        """Substitute ids for ids ``x`` ``[n]`` (−1, out of vocabulary, passes through)."""
        if space is None:
            raise ValueError(f"{self.name} needs the embedding space (space=...)")
        device = space.vectors.device
        x = x.to(device)
        out = x.clone()
        known = x >= 0
        out[known] = self._draw(x[known], space, generator)
        return out

    def _draw(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace,
              generator: torch.Generator) -> torch.Tensor:
        return sample_by_id(ids, lambda rows: self.sampling_log_probs(rows, space), space.size,
                            generator)


class SanTextPlus(SanText):
    """SanText+: the w least-frequent share of words is sensitive and always resampled (outputs are
    sensitive words); other words are resampled with probability p and kept otherwise."""

    name: ClassVar[str] = "santext_plus"
    label: ClassVar[str] = "SanText+"

    Params = SanTextPlusParams

    def __init__(self, params: SanTextPlusParams):
        super().__init__(params)
        self.counts: torch.Tensor | None = None

    def fit_counts(self, counts: torch.Tensor) -> None:
        """Word counts ``[V]`` (from public or training text) that define the sensitive set."""
        self.counts = counts

    def sensitive_mask(self, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[V]`` mask of sensitive words: the ``sensitive_share`` least frequent."""
        order = frequency_rank(space, self.counts)
        n_sensitive = max(1, int(round(self.params.sensitive_share * space.size)))
        mask = torch.zeros(space.size, dtype=torch.bool, device=order.device)
        mask[order[space.size - n_sensitive:]] = True
        return mask

    def output_mask(self, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Resampled words are drawn among the sensitive words only (as in the authors' code)."""
        return self.sensitive_mask(space)

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> Guarantee:
        """ε-dχ only when p = 1; otherwise non-sensitive words are released verbatim w.p. 1 − p."""
        if self.params.p == 1.0:
            return MetricDpGuarantee(self.params.epsilon, "l2", space.name if space else "", "token")
        return NoGuarantee(
            f"SanText+ (p={self.params.p}) keeps a non-sensitive word unchanged with probability "
            f"{1 - self.params.p:.2f}, so its output identifies it; ε={self.params.epsilon}·d holds "
            "only between two sensitive words (UMLDP), not as dχ over the vocabulary")

    def output_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Exact ``[n, V]`` output log-probabilities, including the keep-with-1−p branch."""
        ids = ids.to(space.vectors.device)
        probs = self.sampling_log_probs(ids, space).exp()
        resample = torch.where(self.sensitive_mask(space)[ids], 1.0, self.params.p)
        probs = probs * resample.unsqueeze(1)
        probs[torch.arange(len(ids), device=ids.device), ids] += 1.0 - resample
        return probs.log()

    def _draw(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace,
              generator: torch.Generator) -> torch.Tensor:
        drawn = super()._draw(ids, space, generator)
        coin = torch.rand(len(ids), generator=generator, device=ids.device) < self.params.p
        resample = self.sensitive_mask(space)[ids] | coin
        return torch.where(resample, drawn, ids)
