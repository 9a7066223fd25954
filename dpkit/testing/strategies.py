"""Hypothesis strategies for mechanism inputs: embedding spaces, token ids, batches, params."""

from __future__ import annotations

import math
from typing import Any, Literal, get_args, get_origin

import annotated_types as at
import torch
from hypothesis import strategies as st

from dpkit.text.space import EmbeddingSpace


@st.composite
def embedding_spaces(draw, min_vocab: int = 4, max_vocab: int = 32, min_dim: int = 2,
                     max_dim: int = 8, scale: float = 1.0) -> EmbeddingSpace:
    """A seeded random vocabulary ``t0…`` with Gaussian vectors of standard deviation ``scale``."""
    vocab = draw(st.integers(min_vocab, max_vocab))
    dim = draw(st.integers(min_dim, max_dim))
    seed = draw(st.integers(0, 2**31 - 1))
    vectors = scale * torch.randn(vocab, dim, generator=torch.Generator().manual_seed(seed))
    return EmbeddingSpace(f"hyp-{vocab}x{dim}-{seed}", [f"t{i}" for i in range(vocab)], vectors)


@st.composite
def token_id_sequences(draw, vocab: int | EmbeddingSpace, min_len: int = 1, max_len: int = 16,
                       oov: bool = False) -> torch.Tensor:
    """A ``[n]`` long tensor of ids below ``vocab`` (with −1 out-of-vocabulary ids if ``oov``)."""
    size = vocab.size if isinstance(vocab, EmbeddingSpace) else vocab
    low = -1 if oov else 0
    ids = draw(st.lists(st.integers(low, size - 1), min_size=min_len, max_size=max_len))
    return torch.tensor(ids, dtype=torch.long)


@st.composite
def embedding_batches(draw, dim: int, min_rows: int = 1, max_rows: int = 16,
                      scale: float = 3.0) -> torch.Tensor:
    """A ``[n, dim]`` float32 batch with finite entries in [−scale, scale]."""
    rows = draw(st.integers(min_rows, max_rows))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, dim, generator=gen) * 2 - 1) * scale


def _number(bound: Any) -> float:
    """A numeric field bound as a float (annotated_types types bounds only as comparable)."""
    return float(bound)


def _number_bounds(metadata: list) -> tuple[float | None, float | None, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for item in metadata:
        if isinstance(item, at.Gt):
            lo, lo_open = _number(item.gt), True
        elif isinstance(item, at.Ge):
            lo = _number(item.ge)
        elif isinstance(item, at.Lt):
            hi, hi_open = _number(item.lt), True
        elif isinstance(item, at.Le):
            hi = _number(item.le)
    return lo, hi, lo_open, hi_open


def _field_strategy(annotation: Any, metadata: list, default: Any) -> st.SearchStrategy:
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Literal:
        return st.sampled_from(get_args(annotation))
    if args and get_origin(annotation) is not Literal and annotation not in (int, float, bool):
        inner = _field_strategy(args[0], metadata, default)
        return st.one_of(st.none(), inner) if type(None) in get_args(annotation) else inner
    lo, hi, lo_open, hi_open = _number_bounds(metadata)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        low = None if lo is None else int(math.floor(lo)) + (1 if lo_open and lo == int(lo) else 0)
        high = None if hi is None else int(math.ceil(hi)) - (1 if hi_open and hi == int(hi) else 0)
        low = low if low is not None else (high - 50 if high is not None else 0)
        return st.integers(low, high if high is not None else low + 50)
    if annotation is float:
        flo = lo if lo is not None else -100.0
        fhi = hi if hi is not None else flo + 100.0
        return st.floats(flo, fhi, exclude_min=lo_open, exclude_max=hi_open, allow_nan=False,
                         allow_infinity=False)
    return st.just(default)


@st.composite
def valid_params(draw, params_cls: Any, fixed: dict | None = None) -> dict:
    """A dict of params that ``params_cls`` (a dpkit.Params model) accepts; ``fixed`` pinned."""
    fixed = fixed or {}
    out = dict(fixed)
    for name, field in params_cls.model_fields.items():
        if name in fixed:
            continue
        strategy = _field_strategy(field.annotation, list(field.metadata), field.default)
        if field.is_required():
            out[name] = draw(strategy)
        elif draw(st.booleans()):
            out[name] = draw(strategy)
    try:
        params_cls.model_validate(out)
    except Exception:  # constraints the field bounds do not express (validators, patterns)
        from hypothesis import reject
        reject()
    return out


def mechanism_params(name: str, fixed: dict | None = None) -> st.SearchStrategy:
    """Valid params of the registered mechanism ``name``."""
    from dpkit.testing.params_contract import process_registry

    return valid_params(process_registry().get("mechanism", name).params, fixed)
