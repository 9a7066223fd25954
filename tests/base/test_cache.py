"""dpkit.base.cache: named process caches, and the content-keyed cache across the memo and the disk."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from dpkit.base.cache import cached, caches, clear_all, clear_memo, content_key, process_cache

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


def test_max_entries_keeps_what_was_used_last():
    cache = process_cache("tests.cache_lru", "bounded", max_entries=2)
    built = []
    for key in "abac":
        cache.get_or_build(key, lambda key=key: built.append(key) or key.upper())
    assert built == ["a", "b", "c"]  # the second "a" was served, not rebuilt
    assert "b" not in cache and "a" in cache and "c" in cache


def test_framework_caches_are_registered():
    import dpkit.contract.context  # noqa: F401

    assert {"dpkit.loaded_components", "dpkit.content_memo"} <= set(caches())
    assert all(c.description for c in caches().values())


def test_no_framework_module_keys_a_cache_by_object_id():
    """``id(obj)`` is reused after the object is freed; caches key by content fingerprints."""
    root = Path(__file__).resolve().parents[2] / "dpkit"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if re.search(r"\bid\((space|self|model|dataset)\b", p.read_text())]
    assert not offenders, offenders


def test_key_follows_content_not_identity():
    a = torch.arange(6.0)
    assert content_key({"x": a, "n": 1}) == content_key({"n": 1, "x": a.clone()})
    assert content_key({"x": a}) != content_key({"x": a + 1})
    assert content_key({"x": a}) != content_key({"x": a.reshape(2, 3)})
    assert content_key(np.zeros(3, dtype=np.float32)) != content_key(np.zeros(3, dtype=np.float64))


def test_computed_once_in_process_and_once_on_disk(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"w": torch.ones(3) * len(calls)}

    clear_memo()
    first = cached("t", {"k": 1}, compute, disk=True, root=tmp_path)
    assert cached("t", {"k": 1}, compute, disk=True, root=tmp_path) is first
    clear_memo()  # a new process: the disk copy is read, not recomputed
    again = cached("t", {"k": 1}, compute, disk=True, root=tmp_path)
    assert torch.equal(again["w"], first["w"]) and len(calls) == 1
    cached("t", {"k": 2}, compute, disk=True, root=tmp_path)
    assert len(calls) == 2 and len(list((tmp_path / "shared" / "t").glob("*.pt"))) == 2
    clear_memo()


def test_no_plugin_keys_a_cache_by_object_id():
    plugins = Path(__file__).resolve().parents[2] / "plugins"
    offenders = [str(p) for p in plugins.rglob("*.py") if re.search(r"\bid\((space|model|self)\)",
                                                                      p.read_text())]
    assert not offenders, f"cache keys must be content fingerprints, not id(): {offenders}"
