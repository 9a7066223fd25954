"""STENCIL (no noise, nearest other token) and dχ-STENCIL (window + Laplace noise + nearest token)."""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field, model_validator

import dpkit
from dpkit.base.cache import process_cache
from dpkit.accounting import Guarantee, MetricDpGuarantee, NoGuarantee
from dpkit.text.noise import sample_laplace_noise
from dpkit.text.search import VocabIndex
from dpkit.text.space import stop_word_mask

from dpkit_baselines.laplace import NOISE_STREAM
from dpkit_stencil.window import max_contribution, window_mix



_INDEXES = process_cache("stencil.indexes",
                         "nearest-neighbour index and stop-word mask by (space fingerprint, device, metric)",
                         max_entries=8)

class StencilParams(dpkit.Params):
    """Window size L, Gaussian σ, decoding metric and stop-word handling (§4 of the paper)."""

    window: int = Field(default=5, ge=1, le=64, description="window size L (odd or even)")
    sigma: float = Field(default=1.25, gt=0, allow_inf_nan=False, description="Gaussian σ")
    metric: str = Field(default="cosine", pattern="^(l2|cosine)$",
                        description="distance used to decode the mixed vector")
    keep_stop_words: bool = Field(default=True, description="leave stop words unchanged (§4)")


class Stencil(dpkit.Component):
    """STENCIL (Harel et al. 2024): Gaussian-weighted window, nearest token other than the original.

    Deterministic and it looks at the private token again when decoding: no privacy guarantee.
    Windows run over the in-vocabulary tokens of the sequence; ids −1 (OOV) pass through.
    """

    name: ClassVar[str] = "stencil"
    domain: ClassVar[str] = "token"
    label: ClassVar[str] = "STENCIL"
    noisy: ClassVar[bool] = False
    sequence_level: ClassVar[bool] = True

    Params = StencilParams

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> Guarantee:
        """No guarantee: no noise, and excluding the original token reads the private input."""
        return NoGuarantee("STENCIL adds no noise and decodes to the nearest token other than the "
                           "original, which reads the private input again (not post-processing)")

    def index(self, space: dpkit.EmbeddingSpace) -> tuple[VocabIndex, torch.Tensor]:
        """Cached nearest-neighbour index over ``space`` and its stop-word mask."""
        key = (space.fingerprint, str(space.vectors.device), self.params.metric)
        return _INDEXES.get_or_build(key, lambda: (VocabIndex(space.vectors, self.params.metric),
                                                   stop_word_mask(space)))

    def verbatim_mask(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[n]`` mask of tokens released unchanged by policy (stop words when kept, §4)."""
        if not self.params.keep_stop_words:
            return torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        stop = self.index(space)[1].to(ids.device)
        return (ids >= 0) & stop[ids.clamp_min(0)]

    def mixed(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Window-mixed vectors ``[m, d]`` of the in-vocabulary ids of one sequence."""
        return window_mix(space.vectors[ids].float(), self.params.window, self.params.sigma)

    def clean_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Window-mixed vectors ``[m, d]`` of the in-vocabulary ids of ONE sequence ``x``."""
        if space is None:
            raise ValueError(f"{self.name} needs the embedding space (space=...)")
        x = x.to(space.vectors.device)
        return self.mixed(x[x >= 0], space)

    def noisy_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                      generator: torch.Generator) -> torch.Tensor:
        """The vectors ``[m, d]`` that are decoded: mixed, plus Laplace(η) noise for dχ-STENCIL."""
        vectors = self.clean_vectors(x, space=space)
        if self.noisy and len(vectors):
            vectors = vectors + sample_laplace_noise(len(vectors), space.dim, self.params.eta,
                                                     generator, vectors.device)
        return vectors

    def decode(self, vectors: torch.Tensor, x: torch.Tensor, *,
               space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Substitute ids ``[n]``: nearest token of each vector (STENCIL: other than the original),
        stop words kept when ``keep_stop_words``, OOV ids as they are."""
        index, stop = self.index(space)
        x = x.to(space.vectors.device)
        out = x.clone()
        known = torch.nonzero(x >= 0).squeeze(1)
        if len(known) == 0:
            return out
        ids = x[known]
        exclude = None if self.noisy else ids
        chosen = index.search(vectors, 1, exclude)[1][:, 0]
        replace = ~stop[ids] if self.params.keep_stop_words else torch.ones_like(ids, dtype=torch.bool)
        out[known] = torch.where(replace, chosen, ids)
        return out

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                  generator: torch.Generator) -> torch.Tensor:
        """Substitute ids ``[n]`` for the ids ``x`` ``[n]`` of ONE sequence, in order."""
        return self.decode(self.noisy_vectors(x, space=space, generator=generator), x, space=space)


class DxStencilParams(StencilParams):
    """STENCIL's window parameters plus the Laplace dχ parameter η."""

    eta: float = Field(gt=0, allow_inf_nan=False, description="dχ privacy parameter η")

    @model_validator(mode="after")
    def _window_fits(self) -> DxStencilParams:
        max_contribution(self.window, self.sigma)
        return self


class DxStencil(Stencil):
    """dχ-STENCIL: window mix + multivariate Laplace(η) noise + nearest token (noisy vector only).

    Sequence-level guarantee: P[M(x) = y] ≤ exp(η·C·Σⱼ‖xⱼ − x'ⱼ‖₂)·P[M(x') = y] with C = maxⱼ Σᵢ f_{i,j}
    ≤ 2 (Lemma 1), for sequences of equal length whose stop words and OOV tokens (released as
    they are) coincide. Declared with unit "sequence" and eta = η·C. The paper's cosine-distance
    claim is not made (cosine distance is not a metric).
    """

    name: ClassVar[str] = "dx_stencil"
    label: ClassVar[str] = "dχ-STENCIL"
    noisy: ClassVar[bool] = True
    noise_stream: ClassVar[str] = NOISE_STREAM  # the same draws as NOISE's (privatize_text)

    Params = DxStencilParams

    def noise_contribution(self) -> float:
        """C = maxⱼ Σᵢ f_{i,j}: the declared η·C is η of the per-position noise times C."""
        return max_contribution(self.params.window, self.params.sigma)

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> Guarantee:
        """(η·C)-dχ for the sum of per-token L2 distances of one sequence (C ≤ 2, Lemma 1)."""
        return MetricDpGuarantee(self.params.eta * self.noise_contribution(), "l2",
                                 space.name if space else "", "sequence")
