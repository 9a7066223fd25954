"""Seeded subsamples and train/test splits, and building a TextDataset from raw per-split texts."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from dpkit.data.records import record_hashes
from dpkit.data.types import TextDataset, TextSplit


def subsample(n: int, max_examples: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a seeded subset of ``max_examples`` out of ``n`` (all when None)."""
    if max_examples is None or max_examples >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:max_examples])


def seeded_split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train / test indices (sorted) for a corpus without an official split."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * test_fraction))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def build_dataset(name: str, raw: Mapping[str, tuple[Sequence[str], Sequence[str] | None]],
                  label_names: tuple[str, ...] | None, max_examples: int | None, seed: int,
                  provenance: str) -> TextDataset:
    """A TextDataset from raw per-split texts / string labels, subsampled per split.

    ``meta["record_hashes"]`` holds the hash of every record of the whole corpus (all of ``raw``,
    before subsampling): every subsample of a corpus is charged to the corpus's budget.
    """
    index = {lab: i for i, lab in enumerate(label_names or ())}
    splits, full_sizes = {}, {}
    for split, (texts, labels) in raw.items():
        full_sizes[split] = len(texts)
        keep = subsample(len(texts), max_examples, seed)
        ids = None if labels is None else [index[labels[i]] for i in keep]
        splits[split] = TextSplit([texts[i] for i in keep], ids)
    records = record_hashes(t for texts, _ in raw.values() for t in texts)
    return TextDataset(name, splits, label_names, provenance,
                       {"full_sizes": full_sizes, "max_examples": max_examples, "seed": seed,
                        "record_hashes": records})
