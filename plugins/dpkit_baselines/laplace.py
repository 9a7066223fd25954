"""Multivariate Laplace dχ noise (LaplaceDx) and its nearest-token variant (Text2Text / NOISE)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import dpkit
from dpkit import (
    MetricDpGuarantee,
    VocabIndex,
    clip_norms,
    laplace_log_density,
    process_cache,
    sample_laplace_noise,
    stop_word_mask,
)
from dpkit_baselines.params import LaplaceDxParams, Text2TextParams

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # imported on first use: dpkit validate needs guarantee() only


_INDEXES = process_cache("laplace.decode_indexes",
                         "nearest-neighbour index by (space fingerprint, device, metric)",
                         max_entries=8)

NOISE_STREAM = "laplace_dx"
"""The generator stream shared by every mechanism that draws one multivariate Laplace vector per
in-vocabulary token, in order (laplace_dx, text2text, and mechanisms of other plug-ins that take
the registered laplace_dx's ``noise_stream``, e.g. dx_stencil): ``privatize_text`` gives them
the same draws at one seed (common random numbers; the radius is Gamma(d, 1)/η, so the draws
are the same standardized ones at every η)."""


class LaplaceDx(dpkit.Component):
    """Multivariate Laplace dχ noise on token embeddings (η-dχ per token, L2 metric)."""

    name: ClassVar[str] = "laplace_dx"
    domain: ClassVar[str] = "embedding"
    noise_stream: ClassVar[str] = NOISE_STREAM

    Params = LaplaceDxParams

    @property
    def clip_bound(self) -> float | None:
        """The L2 norm every noisy row is clipped to (None: not clipped); the split canary audit
        applies it to its reference draws (the dχ Laplace law, :class:`dpkit.DxLaplaceNoise`)."""
        return self.params.clip_bound

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> MetricDpGuarantee:
        """η-dχ for the L2 distance between two token embeddings (clipping is post-processing)."""
        return MetricDpGuarantee(self.params.eta, "l2", space.name if space else "", "token")

    def clean_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace | None = None
                      ) -> torch.Tensor:
        """The rows ``[n, d]`` the noise is added to (tests: noise = noisy − clean)."""
        return x.reshape(-1, x.shape[-1]).float()

    def noisy_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace | None = None,
                      generator: torch.Generator) -> torch.Tensor:
        """The rows of ``x`` plus their Laplace noise, ``[n, d]``, before clipping."""
        flat = self.clean_vectors(x)
        return sample_laplace_noise(flat.shape[0], flat.shape[1], self.params.eta, generator,
                                    flat.device).add_(flat)

    def decode(self, noisy: torch.Tensor, x: torch.Tensor, *,
               space: dpkit.EmbeddingSpace | None = None) -> torch.Tensor:
        """The release for noisy rows: clipped when ``clip_bound`` is set, in ``x``'s shape."""
        return clip_norms(noisy, self.params.clip_bound).reshape(x.shape)

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace | None = None,
                  generator: torch.Generator) -> torch.Tensor:
        """Noisy copies of the rows of ``x`` ``[..., d]`` (clipped when ``clip_bound`` is set)."""
        return self.decode(self.noisy_vectors(x, generator=generator), x)

    def log_density(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Exact ``log p(y | x)`` per row; only without clipping (clipping puts mass on the sphere)."""
        if self.clip_bound is not None:
            raise dpkit.AuditError(
                f"laplace_dx with clip_bound={self.params.clip_bound} has no density (clipping puts "
                "mass on the sphere); audit it with clip_bound unset — clipping is post-processing")
        return laplace_log_density(x, y, self.params.eta)


class Text2Text(dpkit.Component):
    """NOISE (Feyisetan et al. 2020; Qu et al. 2021): Laplace dχ on the embedding, then nearest token.

    Ids of −1 (out of vocabulary) pass through unchanged; the caller decides whether to keep them.
    """

    name: ClassVar[str] = "text2text"
    domain: ClassVar[str] = "token"
    label: ClassVar[str] = "NOISE"
    noise_stream: ClassVar[str] = NOISE_STREAM

    Params = Text2TextParams

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> MetricDpGuarantee:
        """η-dχ per token for the L2 distance in ``space`` (decoding is post-processing); stop words
        kept by ``keep_stop_words`` are outside it (see :meth:`verbatim_mask`)."""
        return MetricDpGuarantee(self.params.eta, "l2", space.name if space else "", "token")

    def verbatim_mask(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """``[n]`` mask of tokens released unchanged by policy (stop words when kept)."""
        if not self.params.keep_stop_words:
            return torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        stop = stop_word_mask(space).to(ids.device)
        return (ids >= 0) & stop[ids.clamp_min(0)]

    def index(self, space: dpkit.EmbeddingSpace) -> VocabIndex:
        """The cached nearest-neighbour index over ``space``."""
        key = (space.fingerprint, str(space.vectors.device), self.params.metric)
        return _INDEXES.get_or_build(key, lambda: VocabIndex(space.vectors, self.params.metric))

    def clean_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Embeddings ``[m, d]`` of the in-vocabulary ids of ``x`` (the rows the noise is added to)."""
        if space is None:
            raise ValueError("text2text needs the embedding space (space=...) to embed and decode")
        return space.vectors[x[x >= 0].to(space.vectors.device)]

    def noisy_vectors(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                      generator: torch.Generator) -> torch.Tensor:
        """The noisy embeddings ``[m, d]`` that are decoded (nothing drawn when ``m`` is 0)."""
        vectors = self.clean_vectors(x, space=space)
        if len(vectors) == 0:  # nothing to perturb: draw nothing (as dχ-STENCIL)
            return vectors
        return vectors + sample_laplace_noise(vectors.shape[0], space.dim, self.params.eta,
                                              generator, vectors.device)

    def decode(self, noisy: torch.Tensor, x: torch.Tensor, *,
               space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Substitute ids ``[n]``: the nearest token of each noisy vector (reads only ``noisy``),
        OOV ids and kept stop words as they are."""
        out = x.clone()
        known = x >= 0
        if len(noisy):
            out[known] = self.index(space).search(noisy, 1)[1][:, 0].to(x.device)
        verbatim = self.verbatim_mask(x, space)
        out[verbatim] = x[verbatim]
        return out

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                  generator: torch.Generator) -> torch.Tensor:
        """Substitute ids ``[n]`` for ids ``x`` ``[n]``."""
        return self.decode(self.noisy_vectors(x, space=space, generator=generator), x, space=space)
