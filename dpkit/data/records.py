"""A hash of each parsed record: what the privacy budget identifies a dataset by.

A budget belongs to the people in the data, so a dataset is identified by its records, never by
a file name, an encoding or a catalogue name: a byte-identical copy, a hard link, CRLF line
endings, the same rows as JSON Lines or CSV, latin-1 or UTF-8, and a catalogue corpus reached
under another name all give the same record hashes, and a subset (Reuters R8 inside R52) shares
the hashes of the records it holds. A record is one parsed text (its label is not part of it: a
relabelled copy holds the same people). Before hashing the text is normalised — Unicode NFKC,
case folded, format characters (BOM, zero-width) dropped, every run of whitespace one space — so
a re-cased or re-spaced copy is the same record too. Two people who wrote the same normalised
text share a hash: the budget then over-counts, never under-counts.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from typing import Any

RECORD_HASH = "blake2b-128 of the NFKC, case-folded, whitespace-collapsed text"


def normalise_record(text: str) -> str:
    """The form of ``text`` that is hashed (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return " ".join(kept.split())


def record_hash(text: str) -> str:
    """Hex hash (32 digits) of one parsed record."""
    return hashlib.blake2b(normalise_record(text).encode("utf-8"), digest_size=16).hexdigest()


def record_hashes(texts: Iterable[str]) -> frozenset[str]:
    """The set of record hashes of ``texts`` (duplicates collapse)."""
    return frozenset(record_hash(t) for t in texts)


def records_of(loaded: Any) -> frozenset[str] | None:
    """Record hashes of a loaded dataset: the whole corpus before any subsample when the dataset
    kept them (``meta["record_hashes"]``), else every text of every split; word pairs and analogy
    questions hash each item. None for a type whose records dpkit cannot tell."""
    from dpkit.data.types import Analogies, TextDataset, WordPairs

    if isinstance(loaded, TextDataset):
        kept = loaded.meta.get("record_hashes")
        if kept is not None:
            return frozenset(kept)
        return record_hashes(t for split in loaded.splits.values() for t in split.texts)
    if isinstance(loaded, WordPairs):
        return record_hashes(f"{a}\t{b}\t{score!r}" for a, b, score in loaded.pairs)
    if isinstance(loaded, Analogies):
        return record_hashes("\t".join(q) for qs in loaded.sections.values() for q in qs)
    return None
