"""dpkit's in-process caches, in one place.

Every module-level memo of the framework is a :class:`ProcessCache` created with
:func:`process_cache`, so all of them can be listed (:func:`caches`) and dropped at once
(:func:`clear_all`, e.g. between tests or after a plug-in reload). Keys must describe the content
they were built from: use fingerprints (:attr:`dpkit.EmbeddingSpace.fingerprint`,
:attr:`dpkit.data.TextDataset.fingerprint`) and params, never ``id(obj)`` — CPython reuses ids
of freed objects, so an id-keyed entry can silently serve a different object.

Plug-ins use the same facility::

    from dpkit.cache import process_cache
    _INDEXES = process_cache("my_plugin.indexes", "nearest-neighbour index per space and metric")
    index = _INDEXES.get_or_build((space.fingerprint, metric), lambda: VocabIndex(...))

On-disk artifacts (trained denoisers, downloaded files) are not kept here; they live under
:func:`dpkit.context.cache_root` with file locks.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class ProcessCache(Generic[V]):
    """A named, documented mapping from content keys to built values, held for the process."""

    def __init__(self, name: str, description: str, max_entries: int | None = None):
        self.name, self.description, self.max_entries = name, description, max_entries
        self._entries: dict[Hashable, V] = {}

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The value under ``key``, building and keeping it on first use."""
        if key not in self._entries:
            value = build()
            if self.max_entries is not None and len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))  # oldest first
            self._entries[key] = value
        return self._entries[key]

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
