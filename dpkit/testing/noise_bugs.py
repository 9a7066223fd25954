"""Patches that plant noise-stream bugs into a sampler: reuse across calls, constant re-seeding,
a scale off by a factor of η. For :mod:`dpkit.testing.planted` batteries.

Each takes the dotted owner and attribute of a sampler ``f(..., generator, ...)`` that a
plug-in calls (``sample_laplace_noise`` in a mechanism module, ``sample_by_id``,
``gumbel_argmax``) and returns a :class:`~dpkit.testing.planted.Patch`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from dpkit.testing.planted import Patch, replace


def _generator_of(original: Callable, args: tuple, kwargs: dict) -> torch.Generator:
    bound = inspect.signature(original).bind_partial(*args, **kwargs)
    gen = bound.arguments.get("generator")
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"{original.__name__} was called without a generator")
    return gen


def reseeded_each_draw(owner: str, attribute: str, seed: int = 0) -> Patch:
    """Patch: the generator is re-seeded to ``seed`` before every call (same noise for every
    cell and seed)."""
    def make(original):
        def sampler(*args, **kwargs):
            _generator_of(original, args, kwargs).manual_seed(seed)
            return original(*args, **kwargs)
        return sampler
    return replace(owner, attribute, make)


def reused_across_calls(owner: str, attribute: str) -> Patch:
    """Patch: the first call's draw is kept and its leading rows returned by every later call
    (redrawn, larger, only when a call needs more rows than kept)."""
    def make(original):
        kept: dict[str, Any] = {}

        def sampler(*args, **kwargs):
            out = kept.get("out")
            fresh = original(*args, **kwargs)
            if out is None or out.shape[1:] != fresh.shape[1:] or len(out) < len(fresh):
                kept["out"] = out = fresh
            return out[:len(fresh)].clone()
        return sampler
    return replace(owner, attribute, make)


def eta_times(owner: str, attribute: str, factor: float) -> Patch:
    """Patch: ``sample_laplace_noise(n, d, eta, ...)`` draws at ``factor``·η (the declared η
    unchanged): ``factor`` 2 halves the noise."""
    def make(original):
        def sampler(n, d, eta, *args, **kwargs):
            return original(n, d, eta * factor, *args, **kwargs)
        return sampler
    return replace(owner, attribute, make)
