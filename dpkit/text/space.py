"""EmbeddingSpace: a vocabulary with its embedding table, and word-level tokenization."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from dpkit.base.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # imported on first use: mechanism modules import this one

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


@dataclass(eq=False)
class EmbeddingSpace:
    """Tokens and their vectors (``[V, d]`` float32); the public table an attacker may know."""

    name: str
    tokens: list[str]
    vectors: torch.Tensor
    lowercase: bool = True
    stop_words: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.tokens):
            raise ValueError(f"space {self.name!r}: vectors of shape {tuple(self.vectors.shape)} "
                             f"do not match {len(self.tokens)} tokens")

    @property
    def size(self) -> int:
        """Vocabulary size V."""
        return len(self.tokens)

    @property
    def dim(self) -> int:
        """Embedding dimension d."""
        return int(self.vectors.shape[1])

    @cached_property
    def index(self) -> dict[str, int]:
        """Token -> id (first occurrence wins)."""
        out: dict[str, int] = {}
        for i, tok in enumerate(self.tokens):
            out.setdefault(tok, i)
        return out

    @cached_property
    def fingerprint(self) -> str:
        """Short content hash of tokens and vectors (keys caches and results)."""
        h = hashlib.sha256(self.name.encode())
        h.update("\n".join(self.tokens).encode())
        h.update(self.vectors.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()[:16]

    @cached_property
    def stop_mask(self) -> torch.Tensor:
        """Boolean ``[V]`` mask of stop words."""
        mask = torch.zeros(self.size, dtype=torch.bool)
        for w in self.stop_words:
            if w in self.index:
                mask[self.index[w]] = True
        return mask

    def tokenize(self, text: str) -> list[str]:
        """Split text into word and punctuation tokens (lowercased when the space is)."""
        return _WORD.findall(text.lower() if self.lowercase else text)

    def ids(self, words: list[str]) -> torch.Tensor:
        """Token ids of ``words``; -1 marks out-of-vocabulary words."""
        return torch.tensor([self.index.get(w, -1) for w in words], dtype=torch.long)

    def encode(self, texts: list[str], oov: str = "drop") -> list[torch.Tensor]:
        """Tokenize and look up each text; ``oov='drop'`` removes unknown words, ``'keep'`` keeps -1."""
        if oov not in ("drop", "keep"):
            raise ValueError(f"oov policy must be 'drop' or 'keep', got {oov!r}")
        out = []
        for text in texts:
            ids = self.ids(self.tokenize(text))
            out.append(ids[ids >= 0] if oov == "drop" else ids)
        return out

    def decode(self, ids: torch.Tensor) -> list[str]:
        """Tokens for ``ids`` (``<unk>`` for -1)."""
        return [self.tokens[i] if i >= 0 else "<unk>" for i in ids.tolist()]

    def to(self, device: torch.device | str) -> EmbeddingSpace:
        """A copy whose vectors live on ``device``."""
        return EmbeddingSpace(self.name, self.tokens, self.vectors.to(device), self.lowercase,
                              self.stop_words)

    def restrict(self, n: int) -> EmbeddingSpace:
        """The first ``n`` tokens (tables are frequency-ordered, so the n most common)."""
        return EmbeddingSpace(f"{self.name}[:{n}]", self.tokens[:n], self.vectors[:n],
                              self.lowercase, self.stop_words)


def stop_word_mask(space: EmbeddingSpace) -> torch.Tensor:
    """``[V]`` mask of stop words: the space's own list, else scikit-learn's English list."""
    if space.stop_words:
        return space.stop_mask.to(space.vectors.device)
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # lazy: slow to import

    mask = torch.zeros(space.size, dtype=torch.bool)
    for word in ENGLISH_STOP_WORDS:
        idx = space.index.get(word)
        if idx is not None:
            mask[idx] = True
    return mask.to(space.vectors.device)
