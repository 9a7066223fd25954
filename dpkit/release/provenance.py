"""Where a derived view entry came from, and the tensors a server-side function carries with it.

:meth:`dpkit.release.wire.Wire.derive` runs a function on observed tensors; a tensor the function
captured (in its closure, its defaults or a partial's arguments) that never crossed the wire would
let private data into the attacks' view unseen, so the wire looks for them here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class Provenance:
    """Where a derived view entry came from: its observed sources, the function, the server state
    it was allowed to use, and how many captured tensors never crossed (each makes it ε = ∞)."""

    sources: tuple[str, ...]
    function: str
    server_state: tuple[str, ...] = ()
    foreign_tensors: int = 0


def tensors_in(value: Any, depth: int = 3) -> list[Any]:
    """Tensors and arrays in ``value`` and its lists, tuples and dicts (to ``depth`` levels)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return [value]
    if depth == 0:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v, depth - 1)]
    return []


def captured_tensors(fn: Callable[..., Any]) -> list[Any]:
    """Tensors a function carries with it: closure cells, defaults, a partial's arguments."""
    values: list[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    values += list(getattr(fn, "__defaults__", None) or ())
    values += list((getattr(fn, "__kwdefaults__", None) or {}).values())
    if isinstance(fn, functools.partial):
        values += [*fn.args, *fn.keywords.values(), *captured_tensors(fn.func)]
    return [t for v in values for t in tensors_in(v)]
