"""The server's forward, computed once per distinct batch: shared by the family, never stale."""

from __future__ import annotations

import pytest
import torch
from dpkit_snd.client import SplitClient

from dpkit.base.cache import caches


def forwards(monkeypatch, model) -> list[int]:
    """The batch sizes ``model``'s encoder actually runs from now on."""
    calls: list[int] = []
    original = type(model).server_forward

    def forward(self, x, mask, **kwargs):
        calls.append(len(x))
        return original(self, x, mask, **kwargs)

    monkeypatch.setattr(type(model), "server_forward", forward)
    return calls


@pytest.fixture
def counted(monkeypatch, tiny_model):
    """A client over the tiny encoder (empty memo) and the batch sizes its encoder ran."""
    caches()["snd.server_outputs"].clear()
    return SplitClient(tiny_model, 8), forwards(monkeypatch, tiny_model)


def embedded_batch(client, rows: int, tokens: int, seed: int):
    """Clean token embeddings of a random batch and its all-ones mask."""
    ids = torch.randint(5, 50, (rows, tokens), generator=torch.Generator().manual_seed(seed))
    return client.embed(ids), torch.ones_like(ids)


def test_served_equals_the_forward_and_runs_it_once_per_batch(counted):
    client, calls = counted
    x, mask = embedded_batch(client, 4, 6, seed=0)
    first = client.served(x, mask)
    again = client.served(x.clone(), mask.clone())  # same bytes, other tensors
    assert calls == [4]
    assert torch.equal(first, client.server(x, mask)) and torch.equal(first, again)
    first += 1.0  # a caller changing its copy does not change what the next caller gets
    assert torch.equal(client.served(x, mask), again)
    client.served(x + 1e-3, mask)  # other bytes: computed
    shorter = mask.clone()
    shorter[:, -1] = 0
    client.served(x, shorter)  # another mask: computed
    assert calls == [4, 4, 4, 4]


def test_changed_weights_or_training_mode_are_not_served_from_the_memo(counted):
    client, calls = counted
    x, mask = embedded_batch(client, 3, 5, seed=1)
    before = client.served(x, mask)
    weight = next(p for name, p in client.model.server.named_parameters()
                  if "encoder.layer" in name and name.endswith("weight"))
    with torch.no_grad():
        weight.mul_(1.5)
    try:
        after = client.served(x, mask)
        assert len(calls) == 2 and not torch.equal(before, after)
        client.model.server.train()
        client.served(x, mask)
        client.served(x, mask)
        assert len(calls) == 4  # dropout: each call computed
    finally:
        client.model.server.eval()
        with torch.no_grad():
            weight.div_(1.5)


def test_tokembpriv_after_snd_replays_the_shared_uploads_with_the_same_numbers(
        registry, make_ctx, small, tmp_path, monkeypatch, tiny_model):
    """On one noise stream TokEmbPriv sends SnD's batches: its server passes are replayed, and
    its metrics equal those of a run that computed every forward."""
    params, denoiser = small
    tok = {**params, "eta": 150.0, "clip": True}
    memo = caches()["snd.server_outputs"]
    memo.clear()
    computed = registry.build("defense", "tokembpriv", tok).run(make_ctx(seed=2))
    memo.clear()
    snd = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser}
    registry.build("defense", "snd", snd).run(make_ctx(seed=2, cache=tmp_path / "artifacts"))
    calls = forwards(monkeypatch, tiny_model)
    replayed = registry.build("defense", "tokembpriv", tok).run(make_ctx(seed=2))
    assert calls == []  # every batch it sent, SnD had sent
    assert replayed.metrics == computed.metrics
    assert replayed.wire_bytes == computed.wire_bytes
