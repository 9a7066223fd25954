"""dpkit's caches, in one place: named in-process caches and a content-keyed cross-cell cache.

**Process caches.** Every module-level memo of the framework is a :class:`ProcessCache` created
with :func:`process_cache`, so all of them can be listed (:func:`caches`) and dropped at once
(:func:`clear_all`, e.g. between tests or after a plug-in reload). Keys must describe the content
they were built from: use fingerprints (:attr:`dpkit.EmbeddingSpace.fingerprint`,
:attr:`dpkit.data.TextDataset.fingerprint`) and params, never ``id(obj)`` — CPython reuses ids
of freed objects, so an id-keyed entry can silently serve a different object::

    from dpkit.base.cache import process_cache
    _INDEXES = process_cache("my_plugin.indexes", "nearest-neighbour index per space and metric")
    index = _INDEXES.get_or_build((space.fingerprint, metric), lambda: VocabIndex(...))

**Content-keyed work shared across cells and seeds** (frozen encoder outputs, classifiers trained
on clean text, clusterings, search indexes): :func:`cached` names an entry by a hash of
*everything its value depends on* (any JSON-able structure; tensors and arrays are hashed by
dtype, shape and bytes). It keeps an in-process memo and, with ``disk=True``, writes
``<cache root>/shared/<kind>/<hash>.pt`` under a file lock, so concurrent workers compute an
entry once and never read a torn file. Disk values must be tensors or plain containers of
tensors and numbers: they are read back with ``torch.load(weights_only=True)``, never unpickled.
Never put the seed or swept value in a key unless the value depends on it — and always put them
in when it does::

    from dpkit.base.cache import cached
    feats = cached("minilm_features", {"model": name, "texts": texts, "max_length": 40},
                   lambda: encode(texts))

Trained artifacts with their own formats (denoisers, downloaded files) live under
:func:`cache_root` with file locks (:meth:`dpkit.RunContext.artifact_dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def cache_root() -> Path:
    """Root of dpkit's caches: ``$DPKIT_CACHE`` or ``~/.cache/dpkit``."""
    return Path(os.environ.get("DPKIT_CACHE") or Path.home() / ".cache" / "dpkit").expanduser()


SHARED_VARIABLE = "DPKIT_SHARED_CACHE"


def shared_root() -> Path:
    """Where :func:`cached` keeps values on disk: ``$DPKIT_SHARED_CACHE`` (a server process's
    own, under its server artifacts) or ``<cache>/shared``."""
    return Path(os.environ.get(SHARED_VARIABLE) or cache_root() / "shared").expanduser()


class ProcessCache(Generic[V]):
    """A named, documented mapping from content keys to built values, held for the process."""

    def __init__(self, name: str, description: str, max_entries: int | None = None):
        self.name, self.description, self.max_entries = name, description, max_entries
        self._entries: dict[Hashable, V] = {}

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value under ``key``, building and keeping it on first use; when full, the least
        recently used entry makes room."""
        if key in self._entries:
            self._entries[key] = self._entries.pop(key)  # now the most recently used
            return self._entries[key]
        value = build()
        if self.max_entries is not None and len(self._entries) >= self.max_entries:
            self._entries.pop(next(iter(self._entries)))
        self._entries[key] = value
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()


_CACHES: dict[str, ProcessCache] = {}


def process_cache(name: str, description: str, max_entries: int | None = None) -> ProcessCache:
    """The process cache called ``name``, created on first call (one per name)."""
    if name not in _CACHES:
        _CACHES[name] = ProcessCache(name, description, max_entries)
    return _CACHES[name]


def caches() -> dict[str, ProcessCache]:
    """Every registered process cache by name."""
    return dict(_CACHES)


def clear_all() -> None:
    """Drop the entries of every process cache."""
    for cache in _CACHES.values():
        cache.clear()


T = TypeVar("T")
MEMO_ENTRIES = 32
_MEMO: ProcessCache[Any] = process_cache("dpkit.content_memo", "values of cached(kind, key, ...) "
                                         "by (kind, content hash)", max_entries=MEMO_ENTRIES)


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
    return _MEMO.get_or_build((kind, name), lambda: _from_disk(kind, name, compute, root)
                              if disk else compute())


def _from_disk(kind: str, name: str, compute: Callable[[], T], root: Path | None) -> T:
    import torch
    from filelock import FileLock


    folder = (Path(root) / "shared" if root else shared_root()) / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pt"
    with FileLock(str(path) + ".lock", timeout=6 * 3600):
        if path.exists():
            return torch.load(path, weights_only=True)
        value = compute()
        tmp = path.with_suffix(".tmp")
        torch.save(value, tmp)
        tmp.replace(path)
        return value


def clear_memo() -> None:
    """Forget the in-process layer (tests; or to free memory between specs)."""
    _MEMO.clear()
