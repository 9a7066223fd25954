"""The releases of a token or embedding mechanism run over documents: one rule for every notion.

- η-dχ per token: one pass, ``count`` = released tokens; per sequence: ``count`` = documents
  (a ``"group"`` release: the wire counts the documents of the padded ``[documents, length,
  ...]`` batch that hold a real token).
- (ε, δ)-DP and (k, ε)-anonymity per token compose within a document, so the unit reported is
  one document and ``count`` is the longest document's released tokens (DP-Prompt's n·ε); a
  token in another document is another individual's data, not a further composition.
- Words the mechanism passes through verbatim, and out-of-vocabulary words kept with
  ``oov: keep``, have no guarantee: each gets its ∞ entry naming how many words.
- Documents are sent padded to one length with the release's ``padding`` value (0 for vectors,
  −1 for ids), which the wire verifies closes each document: the lengths it reveals are public
  under the relation (:data:`LENGTHS_NOTE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dpkit.accounting.guarantees import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
)
from dpkit.base.lazy import lazy_import
from dpkit.release.declaration import Release

if TYPE_CHECKING:
    import torch

    from dpkit.text.space import EmbeddingSpace
else:
    torch = lazy_import("torch")  # the protocols (and so dpkit validate) import this module


@runtime_checkable
class ReleasesVerbatim(Protocol):
    """A token mechanism that passes some words through unchanged (e.g. stop words)."""

    def verbatim_mask(self, ids: torch.Tensor, space: EmbeddingSpace) -> torch.Tensor:
        """Boolean mask over ``ids``: True where the word is released verbatim (ε = ∞)."""


@runtime_checkable
class SequenceLevel(Protocol):
    """A mechanism that must see one whole document per call (its guarantee has unit "sequence")."""

    sequence_level: bool


def is_sequence_level(mechanism: Any) -> bool:
    """True for a mechanism that declares ``sequence_level = True``."""
    return bool(getattr(mechanism, "sequence_level", False))


LENGTHS_NOTE = ("document lengths (the verified padding of the main release): dχ and "
                "per-document (ε, δ) compare neighbouring documents of equal length, so lengths are "
                "public under the main release")
PADDING = {"embeddings": 0.0, "substituted_ids": -1}
"""The padding value of each main release name: zero vectors, or id −1."""


def _known_per_doc(docs: list[torch.Tensor]) -> list[int]:
    return [int((d >= 0).sum()) for d in docs]


def main_release(mechanism: Any, space: EmbeddingSpace | None, docs: list[torch.Tensor],
                 name: str) -> Release:
    """The release of the privatized tokens themselves, counted per the module's rules."""
    guarantee = mechanism.guarantee(space)
    per_doc = _known_per_doc(docs)
    n_known = sum(per_doc)
    unit = "row" if name == "embeddings" else "element"
    pad = PADDING.get(name)
    if isinstance(guarantee, (DpGuarantee, KAnonymityGuarantee)):
        longest = max(per_doc, default=0)
        return Release(name, guarantee, f"{mechanism.name} (per document: up to {longest} "
                       "tokens composed)", count=longest, covers=n_known, unit=unit, padding=pad)
    if isinstance(guarantee, MetricDpGuarantee) and guarantee.unit == "sequence" \
            or is_sequence_level(mechanism):
        n_docs = sum(1 for n in per_doc if n)
        return Release(name, guarantee, f"{mechanism.name} (documents)", count=n_docs,
                       unit="group", padding=pad)
    return Release(name, guarantee, f"{mechanism.name} (tokens)", count=n_known, unit=unit,
                   padding=pad)


def verbatim_count(mechanism: Any, space: EmbeddingSpace, docs: list[torch.Tensor]) -> int:
    """How many in-vocabulary tokens of ``docs`` the mechanism releases unchanged."""
    if not isinstance(mechanism, ReleasesVerbatim) or not docs:
        return 0
    flat = torch.cat(docs).to(space.vectors.device)
    known = flat >= 0
    mask = mechanism.verbatim_mask(flat.clamp_min(0), space)
    return int((mask.bool() & known).sum())


def token_releases(mechanism: Any, space: EmbeddingSpace, docs: list[torch.Tensor],
                   name: str) -> list[Release]:
    """Every release of privatizing ``docs`` with ``mechanism`` and sending them as ``name``."""
    out = [main_release(mechanism, space, docs, name)]
    n_verbatim = verbatim_count(mechanism, space, docs)
    if n_verbatim:
        out.append(Release.uncovered(
            "verbatim_tokens", f"{n_verbatim} tokens released verbatim by {mechanism.name}'s "
            "policy (stop words or words without an output set)", count=n_verbatim))
    n_oov = sum(int((d < 0).sum()) for d in docs)
    if n_oov:
        out.append(Release.uncovered("oov_words", f"{n_oov} out-of-vocabulary tokens released "
                                     "verbatim (oov: keep)", count=n_oov))
    return out
