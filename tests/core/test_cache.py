"""The content-keyed cache: computed once per key, across the memo and the disk layer."""

from __future__ import annotations

import numpy as np
import torch

from dpkit.cache import cached, clear_memo, content_key


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
