"""STENCIL (no noise, nearest other token) and dχ-STENCIL (window + Laplace noise + nearest token)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import dpkit
from dpkit import (
    Guarantee,
    MetricDpGuarantee,
    NoGuarantee,
    VocabIndex,
    process_cache,
    sample_laplace_noise,
    stop_word_mask,
)
from dpkit_stencil.params import DxStencilParams, StencilParams
from dpkit_stencil.window import max_contribution, window_mix

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # imported on first use: dpkit validate needs guarantee() only


_INDEXES = process_cache("stencil.indexes",
                         "nearest-neighbour index and stop-word mask by (space fingerprint, device, metric)",
                         max_entries=8)


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
    noise_stream: ClassVar[str] = "laplace_dx"
    """The generator stream of the registered laplace_dx (its ``noise_stream``): privatize_text
    gives dχ-STENCIL the same standardized draws as NOISE at one seed (tested against the
    registry in tests/plugins/stencil)."""

    Params = DxStencilParams

    def noise_contribution(self) -> float:
        """C = maxⱼ Σᵢ f_{i,j}: the declared η·C is η of the per-position noise times C."""
        return max_contribution(self.params.window, self.params.sigma)

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> Guarantee:
        """(η·C)-dχ for the sum of per-token L2 distances of one sequence (C ≤ 2, Lemma 1)."""
        return MetricDpGuarantee(self.params.eta * self.noise_contribution(), "l2",
                                 space.name if space else "", "sequence")
