"""Content-keyed cache for work shared across cells and seeds (frozen encoder outputs, classifiers
trained on clean text, denoisers per η, search indexes).

An entry is named by a hash of *everything its value depends on*: pass those inputs as ``key``
(any JSON-able structure; tensors and arrays are hashed by dtype, shape and bytes). Two layers:
an in-process memo (one worker reuses objects without touching disk) and, with ``disk=True``,
``<cache root>/<kind>/<hash>.pt`` written with ``torch.save`` under a file lock, so concurrent
workers compute an entry once and never read a torn file. Never put the seed or swept value in
a key unless the value depends on it — and always put them in when it does.

    from dpkit.cache import cached
    feats = cached("minilm_features", {"model": name, "texts": texts, "max_length": 40},
                   lambda: encode(texts))
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MEMO_ENTRIES = 32
_memo: OrderedDict[tuple[str, str], Any] = OrderedDict()


def content_key(key: Any) -> str:
    """24 hex digits of sha256 over ``key`` (canonical JSON; tensors/arrays by dtype, shape, bytes)."""
    digest = hashlib.sha256()
    digest.update(json.dumps(_canonical(key), sort_keys=True, separators=(",", ":"),
                             default=str).encode())
    return digest.hexdigest()[:24]


def _canonical(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch tensor
        value = value.detach().cpu().contiguous().numpy()
    if hasattr(value, "tobytes") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return {"array": str(value.dtype), "shape": list(value.shape),
                "sha256": hashlib.sha256(value.tobytes()).hexdigest()}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def cached(kind: str, key: Any, compute: Callable[[], T], *, disk: bool = False,
           root: Path | None = None) -> T:
    """The value for (``kind``, ``key``): from the memo, else from disk (``disk=True``), else
    ``compute()`` (then stored in both)."""
    name = content_key(key)
    memo_key = (kind, name)
    if memo_key in _memo:
        _memo.move_to_end(memo_key)
        return _memo[memo_key]
    value = _from_disk(kind, name, compute, root) if disk else compute()
    _memo[memo_key] = value
    while len(_memo) > MEMO_ENTRIES:
        _memo.popitem(last=False)
    return value


def _from_disk(kind: str, name: str, compute: Callable[[], T], root: Path | None) -> T:
    import torch
    from filelock import FileLock

    from dpkit.context import cache_root

    folder = Path(root or cache_root()) / "shared" / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pt"
    with FileLock(str(path) + ".lock", timeout=6 * 3600):
        if path.exists():
            return torch.load(path, weights_only=False)
        value = compute()
        tmp = path.with_suffix(".tmp")
        torch.save(value, tmp)
        tmp.replace(path)
        return value


def clear_memo() -> None:
    """Forget the in-process layer (tests; or to free memory between specs)."""
    _memo.clear()
