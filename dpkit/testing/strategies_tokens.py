"""Hypothesis strategies for token mechanisms: small embedding spaces, token sequences, tables."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from dpkit.text.space import EmbeddingSpace

STOP = ("the", "a", "of", "and")


def random_space(vocab: int, dim: int, seed: int, *, stop_words: bool = False,
                 scale: float = 1.0) -> EmbeddingSpace:
    """A seeded Gaussian space of ``vocab`` words ``w0…`` (the first four are stop words if asked)."""
    words = [f"w{i}" for i in range(vocab)]
    if stop_words:
        words[:len(STOP)] = STOP
    g = torch.Generator().manual_seed(seed)
    vectors = scale * torch.randn(vocab, dim, generator=g)
    return EmbeddingSpace(f"random-{vocab}x{dim}-{seed}", words, vectors,
                          stop_words=frozenset(STOP) if stop_words else frozenset())


@st.composite
def spaces(draw, min_vocab: int = 8, max_vocab: int = 64, max_dim: int = 12,
           stop_words: bool = False) -> EmbeddingSpace:
    """A small random EmbeddingSpace."""
    return random_space(draw(st.integers(min_vocab, max_vocab)), draw(st.integers(1, max_dim)),
                        draw(st.integers(0, 2**16)), stop_words=stop_words,
                        scale=draw(st.sampled_from([0.1, 1.0, 5.0])))


@st.composite
def token_sequences(draw, space: EmbeddingSpace, min_size: int = 1, max_size: int = 24,
                    oov: bool = False) -> torch.Tensor:
    """Ids ``[n]`` of one sequence over ``space`` (with −1 OOV entries when ``oov``)."""
    low = -1 if oov else 0
    ids = draw(st.lists(st.integers(low, space.size - 1), min_size=min_size, max_size=max_size))
    return torch.tensor(ids, dtype=torch.long)


@st.composite
def search_problems(draw) -> tuple[torch.Tensor, torch.Tensor, int, str, int]:
    """(queries, table, k, metric, max_block) small enough for brute force, with forced chunking."""
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    n, V, d = draw(st.integers(1, 40)), draw(st.integers(2, 80)), draw(st.integers(1, 10))
    k = draw(st.integers(1, min(V, 6)))
    metric = draw(st.sampled_from(["l2", "cosine"]))
    block = draw(st.sampled_from([1, 7, 64, 2**20]))
    return torch.randn(n, d, generator=g), torch.randn(V, d, generator=g), k, metric, block
