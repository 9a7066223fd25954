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
    with pytest.raises(ServerError) as refused:
        raise_if_error(decode(channel.request(_message(rows))))
    assert str(refused.value).endswith(
        "'embeddings' arrived after the run ended (the runner has taken its final tally of what "
        "crossed); nothing more reaches the server — send everything from run(ctx), before it "
        "returns")
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
    assert taken["releases"] == sorted({*dpkit.STANDARD_RELEASES, *server_cls.receives,
                                        *server_cls.handlers})
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


def test_the_server_receives_what_crossed_and_the_tally_counts_it(channel):
    import hashlib

    host = channel.host
    got = []
    host.server.receive = lambda message: got.append(message)
    host.received = []
    first, second = torch.arange(8.0).reshape(2, 4), torch.ones(1, 4)
    mask = torch.tensor([True, False])
    for rows, real in ((first, mask), (second, None)):
        request = {"op": "message", "name": "embeddings", "phase": "run", "tensor": rows,
                   "mask": real}
        raise_if_error(decode(channel.request(encode(request))))
    assert [(m.name, m.phase, m.batch) for m in got[:2]] == [("embeddings", "run", 0),
                                                             ("embeddings", "run", 1)]
    assert torch.equal(got[0].tensor, first) and torch.equal(got[1].tensor, second)
    assert torch.equal(got[0].mask, mask) and got[1].mask is None
    assert got[0].tensor.device == host.device and host.received == got[:2]
    expected = hashlib.blake2b(digest_size=16)
    for rows in (first, second):
        expected.update(rows.numpy().tobytes())
    empty = {"op": "message", "name": "embeddings", "phase": "run", "tensor": torch.empty(0, 4),
             "mask": None}  # refused by the wire; sent past it, it adds no bytes to the digest
    raise_if_error(decode(channel.request(encode(empty))))
    told = tally(channel)
    assert told["messages"] == {"embeddings": 3} and told["bytes"] == {"embeddings": 48}
    assert told["digests"] == {"embeddings": expected.hexdigest()}
    named = f"request 'nothing_here' names no handler of {type(host.server).__name__}$"
    with pytest.raises(ServerError, match=named):
        raise_if_error(decode(channel.request(encode(
            {"op": "message", "name": "nothing_here", "phase": "run", "tensor": None,
             "mask": None}))))
    with pytest.raises(ServerError, match=f"release 'r_3f80' is not one "
                                          f"{type(host.server).__name__} takes$"):
        raise_if_error(decode(channel.request(encode(
            {"op": "message", "name": "r_3f80", "phase": "run", "tensor": torch.ones(1, 4),
             "mask": None}))))
