"""Bytes on the wire: what crosses between the client and the server is encoded here, never pickled.

A payload is a tree of dicts, lists, tuples, strings, numbers, booleans, None, torch tensors and
numpy arrays. :func:`encode` writes the tensors into one safetensors buffer (contiguous CPU copies)
and the tree, with each tensor replaced by a reference, into the buffer's JSON metadata;
:func:`decode` reads them back into fresh tensors that share no storage with the sender's. No
code runs on decoding: an object of any other type is refused when encoded.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as _load
from safetensors.torch import save as _save

from dpkit.base.errors import ServerError

TENSOR, ARRAY, TUPLE, FLOAT = "__tensor__", "__ndarray__", "__tuple__", "__float__"


class CodecError(TypeError):
    """A payload holds something that cannot cross the wire as data."""


def encode(payload: Any) -> bytes:
    """``payload`` as bytes: tensors in a safetensors buffer, the rest as JSON metadata."""
    tensors: dict[str, torch.Tensor] = {}
    tree = _flatten(payload, tensors, "payload")
    return _save(tensors, metadata={"tree": json.dumps(tree, allow_nan=False)})


def decode(data: bytes) -> Any:
    """The payload :func:`encode` wrote, with fresh tensors (CPU) and numpy arrays."""
    try:
        tensors = _load(data)
        header_len = int.from_bytes(data[:8], "little")
        tree = json.loads(json.loads(data[8:8 + header_len])["__metadata__"]["tree"])
    except Exception as exc:  # safetensors' own error type is private
        raise CodecError(f"these {len(data)} bytes are not a dpkit message "
                         f"({type(exc).__name__}: {exc})") from None
    return _unflatten(tree, tensors)


def raise_if_error(answer: Any) -> Any:
    """Re-raise a failure the server encoded as its answer; otherwise return the answer."""
    if isinstance(answer, dict) and "__error__" in answer:
        raise ServerError(answer["__error__"], answer.get("message", ""),
                          answer.get("traceback", ""))
    return answer


def _flatten(value: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    if isinstance(value, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = value.detach().to("cpu", copy=True).contiguous()
        return {TENSOR: key}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise CodecError(f"{where}: a numpy array of Python objects cannot cross the wire")
        key = f"t{len(tensors)}"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(value).copy())
        return {ARRAY: key}
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {FLOAT: repr(value)}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise CodecError(f"{where}: dict keys must be strings to cross the wire")
        return {k: _flatten(v, tensors, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_flatten(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]
        return {TUPLE: items} if isinstance(value, tuple) else items
    raise CodecError(f"{where}: a {type(value).__qualname__} cannot cross the wire; send tensors, "
                     "numpy arrays, numbers, strings and lists or dicts of them")


def _unflatten(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, list):
        return [_unflatten(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if TENSOR in tree:
        return tensors[tree[TENSOR]]
    if ARRAY in tree:
        return tensors[tree[ARRAY]].numpy()
    if TUPLE in tree:
        return tuple(_unflatten(v, tensors) for v in tree[TUPLE])
    if FLOAT in tree:
        return float(tree[FLOAT])
    return {k: _unflatten(v, tensors) for k, v in tree.items()}



def to_device(payload: Any, device: torch.device | str) -> Any:
    """``payload`` with every tensor moved to ``device`` (answers to the client's device; guesses
    and truth to the CPU, where the evaluator scores them)."""
    if isinstance(payload, torch.Tensor):
        return payload.to(device)
    if isinstance(payload, dict):
        return {k: to_device(v, device) for k, v in payload.items()}
    if isinstance(payload, (list, tuple)):
        return type(payload)(to_device(v, device) for v in payload)
    return payload
