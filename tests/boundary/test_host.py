"""The server process's host: what it takes after the runner's final tally."""

from __future__ import annotations

import pytest
import torch

import dpkit
from dpkit.accounting import Ledger
from dpkit.base.errors import ServerError
from dpkit.boundary.session import connector, tally
from dpkit.contract.context import RunContext
from dpkit.release.codec import decode, encode, raise_if_error


def _message(rows: torch.Tensor) -> bytes:
    return encode({"op": "message", "name": "embeddings", "phase": "run", "batch": 0,
                   "tensor": rows, "mask": None})


@pytest.fixture
def channel(toy_registry, tmp_path):
    """An in-process server of the toy defense (the host a server process runs)."""
    ctx = RunContext(dataset=None, model=None, device=torch.device("cpu"), seed=3,
                     ledger=Ledger(1e-5), registry=toy_registry,
                     cache_dir=tmp_path / "cache" / "artifacts")
    connect = connector("inprocess")
    connect(toy_registry.build("defense", "toy_noise", {}), ctx)
    return connect.channel


def test_messages_are_taken_until_the_final_tally_and_refused_after(channel):
    rows = torch.ones(2, 4)
    raise_if_error(decode(channel.request(_message(rows))))
    assert tally(channel)["messages"] == {"embeddings": 1}  # a tally on the way ends nothing
    raise_if_error(decode(channel.request(_message(rows))))
    assert tally(channel, final=True)["messages"] == {"embeddings": 2}
    with pytest.raises(ServerError, match="arrived after the run ended"):
        raise_if_error(decode(channel.request(_message(rows))))
    assert tally(channel)["messages"] == {"embeddings": 2}  # the refused one is not counted
    assert channel.host.ended


def test_an_attack_still_runs_after_the_final_tally(channel):
    tally(channel, final=True)
    answer = decode(channel.request(encode({"op": "attack", "name": "toy_attack", "params": {},
                                            "seed": 0})))
    assert "__error__" not in answer, answer


def test_the_server_says_its_labels_from_its_class_before_any_message(channel):
    taken = decode(channel.request(encode({"op": "labels"})))
    server_cls = type(channel.host.server)
    assert set(taken["phases"]) == {*dpkit.STANDARD_PHASES, *server_cls.phases}
    assert taken["handlers"] == sorted(server_cls.handlers)
    channel.host.server.__class__ = type("Grown", (server_cls,), {"phases": ("raw_00ff",)})
    raise_if_error(decode(channel.request(_message(torch.ones(1, 4)))))
    assert decode(channel.request(encode({"op": "labels"}))) == taken  # fixed when it was built


def test_the_batch_number_is_the_servers_count_whatever_the_client_writes(channel):
    seen = []
    channel.host.server.receive = lambda message: seen.append((message.phase, message.batch))
    for phase, batch in (("run", 999), ("run", 7), ("eval", 123), ("run", 0)):
        request = {"op": "message", "name": "embeddings", "phase": phase, "batch": batch,
                   "tensor": torch.ones(1, 4), "mask": None}
        raise_if_error(decode(channel.request(encode(request))))
    assert seen == [("run", 0), ("run", 1), ("eval", 0), ("run", 2)]
