"""Dataset types returned by dataset sources."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class TextSplit:
    """Texts with optional integer labels (indices into ``TextDataset.label_names``)."""

    texts: list[str]
    labels: list[int] | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and len(self.labels) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class TextDataset:
    """A labelled or unlabelled corpus with named splits (``"train"``, ``"test"``, ...)."""

    name: str
    splits: dict[str, TextSplit]
    label_names: tuple[str, ...] | None = None
    provenance: str = ""
    meta: dict = field(default_factory=dict)

    def __getitem__(self, split: str) -> TextSplit:
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"dataset {self.name!r} has no split {split!r}; "
                           f"available: {', '.join(self.splits)}") from None

    @cached_property
    def fingerprint(self) -> str:
        """Short content hash (keys cells and cached artifacts)."""
        h = hashlib.sha256(self.name.encode())
        for split in sorted(self.splits):
            s = self.splits[split]
            h.update(split.encode())
            for t in s.texts:
                h.update(t.encode() + b"\0")
            h.update(repr(s.labels).encode())
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class WordPairs:
    """A word-similarity benchmark: (word, word, human score) triples."""

    name: str
    pairs: list[tuple[str, str, float]]
    path: str = ""


@dataclass(frozen=True)
class Analogies:
    """Analogy questions a:b :: c:d grouped in sections (the questions-words format)."""

    name: str
    path: str
    sections: dict[str, list[tuple[str, str, str, str]]] = field(default_factory=dict)
