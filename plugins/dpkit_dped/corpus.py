"""Corpus handling for DPED: tokenizing, the public vocabulary, disjoint shards, skip-gram pairs."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

_WORD = re.compile(r"[a-z]+")


def tokenize(text: str) -> list[str]:
    """Lowercase letter-only words (20 Newsgroups is stored that way; other corpora are mapped to it)."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    """Words ordered by frequency in the **public** corpus, with those public counts."""

    words: tuple[str, ...]
    counts: tuple[int, ...]

    @cached_property
    def index(self) -> dict[str, int]:
        """Word -> id."""
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def frequencies(self) -> dict[str, int]:
        """Word -> public count (what gensim's ``build_vocab_from_freq`` takes)."""
        return dict(zip(self.words, self.counts))


def build_vocabulary(texts: list[str], size: int, min_count: int = 5) -> Vocabulary:
    """The ``size`` most frequent words of ``texts`` (a public corpus) seen at least ``min_count`` times."""
    counts = Counter(w for t in texts for w in tokenize(t))
    common = [(w, c) for w, c in counts.most_common(size) if c >= min_count]
    if len(common) < 2:
        raise ValueError(f"the public corpus gives only {len(common)} words with count ≥ {min_count}; "
                         "use a larger public corpus or lower min_count")
    words, freq = zip(*common)
    return Vocabulary(tuple(words), tuple(int(c) for c in freq))


def shard_of(text: str, num_shards: int, seed: int) -> int:
    """The teacher that owns ``text``: a keyed hash of the document alone.

    Adding or removing one document therefore changes exactly one shard (the DP adjacency used
    throughout, matching Opacus' add/remove accounting); an index-based split would move others.
    """
    digest = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % num_shards


def partition(texts: list[str], num_shards: int, seed: int) -> list[list[int]]:
    """Document indices of each of ``num_shards`` disjoint shards."""
    shards: list[list[int]] = [[] for _ in range(num_shards)]
    for i, text in enumerate(texts):
        shards[shard_of(text, num_shards, seed)].append(i)
    return shards


def sentences(texts: list[str], vocab: Vocabulary) -> list[list[str]]:
    """Tokenized documents with out-of-vocabulary words removed (gensim's input)."""
    index = vocab.index
    return [[w for w in tokenize(t) if w in index] for t in texts]


def encode(texts: list[str], vocab: Vocabulary) -> list[np.ndarray]:
    """Each document as an int64 array of vocabulary ids (unknown words dropped)."""
    index = vocab.index
    return [np.fromiter((index[w] for w in tokenize(t) if w in index), dtype=np.int64)
            for t in texts]


def skipgram_pairs(docs: list[np.ndarray], window: int, max_pairs: int,
                   rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(center, context) id pairs within ``window`` of each other, subsampled to ``max_pairs``."""
    centers, contexts = [], []
    for offset in range(1, window + 1):
        for doc in docs:
            if len(doc) > offset:
                centers += [doc[:-offset], doc[offset:]]
                contexts += [doc[offset:], doc[:-offset]]
    if not centers:
        raise ValueError(f"no skip-gram pairs: the {len(docs)} documents have no two in-vocabulary "
                         "words within the window; use more text or a larger vocabulary")
    c, x = np.concatenate(centers), np.concatenate(contexts)
    if len(c) > max_pairs:
        keep = rng.choice(len(c), size=max_pairs, replace=False)
        c, x = c[keep], x[keep]
    return torch.from_numpy(c), torch.from_numpy(x)


def document_tensor(docs: list[np.ndarray], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For DP-SGD: each document's first ``max_len`` ids, padded, ``[n, L]``, and their lengths ``[n]``.

    One row is one privacy unit (one document); the cut depends on that document alone.
    """
    width = max(2, min(max_len, max((len(d) for d in docs), default=2)))
    tokens = np.zeros((len(docs), width), dtype=np.int64)
    lengths = np.zeros(len(docs), dtype=np.int64)
    for i, doc in enumerate(docs):
        cut = doc[:width]
        tokens[i, :len(cut)], lengths[i] = cut, len(cut)
    return torch.from_numpy(tokens), torch.from_numpy(lengths)


def draw_pairs(tokens: torch.Tensor, lengths: torch.Tensor, pairs: int, window: int,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``pairs`` fresh (center, context) pairs within ``window`` from each row: ``[B, P]`` each,
    plus a mask of the pairs that fall inside their document."""
    dev = tokens.device
    shape = (len(tokens), pairs)
    pos = (torch.rand(shape, generator=generator, device=dev) * lengths.unsqueeze(1)).long()
    off = torch.randint(1, window + 1, shape, generator=generator, device=dev)
    off = off * (torch.randint(0, 2, shape, generator=generator, device=dev) * 2 - 1)
    ctx = pos + off
    mask = ((ctx >= 0) & (ctx < lengths.unsqueeze(1)) & (lengths.unsqueeze(1) >= 2)).float()
    ctx = ctx.clamp(0, tokens.shape[1] - 1)
    return tokens.gather(1, pos.clamp(max=tokens.shape[1] - 1)), tokens.gather(1, ctx), mask
