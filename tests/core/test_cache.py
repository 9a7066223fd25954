"""The process caches: one facility, content keys, listed and cleared together."""

from __future__ import annotations

import re
from pathlib import Path

from dpkit.cache import caches, clear_all, process_cache


def test_get_or_build_builds_once_and_clear_all_drops_every_cache():
    built = []
    cache = process_cache("tests.cache_a", "test cache")
    assert process_cache("tests.cache_a", "same name, same cache") is cache
    for _ in range(3):
        assert cache.get_or_build(("k", 1), lambda: built.append(1) or "v") == "v"
    assert built == [1] and ("k", 1) in cache
    clear_all()
    assert len(cache) == 0


def test_max_entries_evicts_the_oldest():
    cache = process_cache("tests.cache_b", "bounded", max_entries=2)
    for key in "abc":
        cache.get_or_build(key, lambda key=key: key.upper())
    assert "a" not in cache and "b" in cache and "c" in cache


def test_framework_caches_are_registered():
    import dpkit.context  # noqa: F401
    import dpkit.tasks.classifier  # noqa: F401

    assert {"dpkit.loaded_components", "dpkit.text_classifiers"} <= set(caches())
    assert all(c.description for c in caches().values())


def test_no_framework_module_keys_a_cache_by_object_id():
    """``id(obj)`` is reused after the object is freed; caches key by content fingerprints."""
    root = Path(__file__).resolve().parents[2] / "dpkit"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if re.search(r"\bid\((space|self|model|dataset)\b", p.read_text())]
    assert not offenders, offenders
