"""The client's memo of the public encoder's forward (clean references, denoiser training),
computed once per distinct batch and never stale. (A cell's server computes its own forwards in a
process of its own: the boundary leaves no server-side cache across cells.)"""

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
