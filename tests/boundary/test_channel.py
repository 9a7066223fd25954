"""The server process: built from public things only, answers with bytes, fails loudly."""

from __future__ import annotations

import pytest
import torch

import dpkit.contract.plugins
from dpkit.base.errors import ServerError
from dpkit.boundary.channel import InProcessChannel, ProcessChannel
from dpkit.release.codec import decode, encode, raise_if_error


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries")
    dpkit.contract.plugins.reset()
    yield dpkit.contract.plugins.get_registry()
    dpkit.contract.plugins.reset()


def _init(registry, defense="toy_noise", **over):
    init = {"defense": defense, "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 123, "device": "cpu", "plugins": dict(registry.modules)}
    return {**init, **over}


def _ask(channel, request):
    return raise_if_error(decode(channel.request(encode(request))))


def test_a_process_server_keeps_what_arrives_and_tallies_it(toy_registry):
    channel = ProcessChannel(_init(toy_registry))
    try:
        rows = torch.randn(4, 8)
        _ask(channel, {"op": "message", "name": "embeddings", "phase": "test", "batch": 0,
                       "tensor": rows, "mask": None})
        tally = _ask(channel, {"op": "tally"})
        assert tally["messages"] == {"embeddings": 1} and tally["bytes"] == {"embeddings": 128}
        assert len(tally["digests"]["embeddings"]) == 32
        out = _ask(channel, {"op": "attack", "name": "toy_attack", "params": {}, "seed": 1})
        assert out["guesses"].shape == (4,)
        assert channel.pid is not None and channel.pid != __import__("os").getpid()
    finally:
        channel.close()


def test_server_failures_come_back_with_their_traceback(toy_registry):
    channel = ProcessChannel(_init(toy_registry))
    try:
        with pytest.raises(ServerError, match="no handler"):
            _ask(channel, {"op": "message", "name": "nothing", "phase": "run", "batch": 0,
                           "tensor": None, "mask": None})
        with pytest.raises(ServerError, match="unknown attack|ComponentNotFound"):
            _ask(channel, {"op": "attack", "name": "no_such_attack", "params": {}, "seed": 0})
    finally:
        channel.close()
    with pytest.raises(ServerError, match="ComponentNotFound|unknown defense"):
        ProcessChannel(_init(toy_registry, defense="no_such_defense"))


def test_a_server_can_load_only_the_datasets_its_cell_approved(toy_registry):
    host = InProcessChannel(_init(toy_registry), toy_registry).host
    with pytest.raises(Exception, match="did not approve"):
        host.public.load_dataset("toy_text")
    with pytest.raises(Exception, match="mechanisms and attacks only"):
        host.public.build("dataset", "toy_text")
    assert host.public.seed == 123 and host.server.public.model is not None
