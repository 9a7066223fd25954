"""What a server keeps for the attacks: every message's rows in order, joined once, and at most
``keep_rows`` of a release without a handler (a stream of training-time messages must not fill
the server's memory, nor cost quadratic time)."""

from __future__ import annotations

import torch

import dpkit
from dpkit.contract.server import Message


def message(name: str, rows: torch.Tensor) -> Message:
    return Message(name, "run", 0, rows)


def test_rows_are_kept_in_order_and_joined_once_and_non_tensors_replace():
    server = dpkit.Server(dpkit.NoParams(), public=None)
    parts = [torch.full((3, 2), float(i)) for i in range(4)]
    for p in parts:
        server.receive(message("embeddings", p))
    assert torch.equal(server.observed["embeddings"], torch.cat(parts))
    assert len(server._chunks["embeddings"]) == 1  # joined on the first read, not on each send
    server.observe("embeddings", "replaced")
    assert server.observed["embeddings"] == "replaced"
    server.observe("embeddings", torch.ones(2, 2))
    assert torch.equal(server.observed["embeddings"], torch.ones(2, 2))


def test_a_passive_server_keeps_at_most_keep_rows_of_a_stream():
    class Small(dpkit.Server):
        keep_rows = 5

    server = Small(dpkit.NoParams(), public=None)
    for i in range(4):
        server.receive(message("noisy_gradient", torch.full((2, 3), float(i))))
    kept = server.observed["noisy_gradient"]
    assert kept.shape == (5, 3) and kept[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 2.0]
