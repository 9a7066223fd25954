"""Adversarial: the raw rows spelled in what a message carries besides its counted rows — its
release's name, its dtype, its width, its padded length, a message of padding only, a tensor
with no rows — tried against the whole runner. Each is refused before it crosses; the control
shows their server recovering the raw rows from the same messages made by hand, so the refusals
are the wire's doing."""

from __future__ import annotations

import math
import os

import pytest
import torch

import dpkit.contract.plugins
from dpkit.contract.server import Message
from dpkit.testing.shape_tricks import DTYPES, REQUEST_ROWS, ShapeTrickServer, _chunks
from dpkit.testing.wire_tricks import SPELLED_ROWS

from dpkit.testing.boundary import toy_rows as _run

REFUSED = {"trick_release_name": "is not one the server takes",
           "trick_width": "dimension 1 has", "trick_dtype": "its dtype is",
           "trick_padded_length": "its padded dimension 0", "trick_padding_only": "refused",
           "trick_empty_shape": "refused"}


@pytest.fixture
def shape_plugins(leak_plugins, monkeypatch):
    """The adversaries' plug-ins, the wire tricks and the shape tricks."""
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", os.environ["DPKIT_EXTRA_PLUGINS"]
                       + ",tricks=dpkit.testing.wire_tricks,shapes=dpkit.testing.shape_tricks")
    dpkit.contract.plugins.reset()


def test_names_dtypes_and_shapes_a_client_picks_do_not_cross(tmp_path, shape_plugins):
    rows = _run(tmp_path, "shapes", ["toy_noise", *REFUSED])
    assert rows["toy_noise"]["metrics"]["raw_found"] == 0.0
    for trick, refusal in REFUSED.items():
        assert "error" in rows[trick] and refusal in rows[trick]["error"], (trick, rows[trick])
        assert "Nothing was sent" in rows[trick]["error"], rows[trick]


def test_how_many_sequences_a_counted_message_holds_still_crosses(tmp_path, shape_plugins):
    """Open, and named in the threat model: a message that carries one real row can hold any
    number of sequences of padding only, so their number spells a byte per counted unit — within
    the units the release declared it may carry (``covers``: the trick declares slack)."""
    rows = _run(tmp_path, "sequences", ["toy_noise", "trick_sequence_count"])
    row = rows["trick_sequence_count"]
    assert "error" not in row and math.isfinite(row["privacy"]["epsilon"]), row
    assert row["metrics"]["raw_found"] == pytest.approx(SPELLED_ROWS / row["metrics"]["sent"])


def test_how_many_requests_a_client_sends_still_crosses(tmp_path, shape_plugins):
    """Open, and named in the threat model: a request carries no tensor and counts no unit, so
    how many a client sends between two others spells a byte each, at no cost on the ledger."""
    rows = _run(tmp_path, "requests", ["toy_noise", "trick_request_count"])
    row = rows["trick_request_count"]
    assert "error" not in row and math.isfinite(row["privacy"]["epsilon"]), row
    assert row["privacy"]["epsilon"] == rows["toy_noise"]["privacy"]["epsilon"]  # free
    assert row["metrics"]["raw_found"] == pytest.approx(REQUEST_ROWS / row["metrics"]["sent"])


def test_control_the_shape_server_reads_what_the_refused_messages_would_spell():
    class Public:
        model = type("Space", (), {"vectors": torch.zeros(5, 8)})()

    raw = torch.randn(SPELLED_ROWS, 8)
    data = raw.numpy().tobytes()
    server = ShapeTrickServer(None, Public())
    for chunk in _chunks(data):
        server.receive(Message("r" + chunk.hex(), "name", 0, torch.zeros(1, 8)))
    for byte in data:
        server.receive(Message("embeddings", "width", 0, torch.zeros(1, byte + 1)))
        server.receive(Message("embeddings", "length", 0, torch.zeros(byte + 1, 8)))
        server.receive(Message("embeddings", "count", 0, torch.zeros(byte + 1, 8)))
        server.receive(Message("embeddings", "sequences", 0, torch.zeros(byte + 1, 1, 8)))
        for shift in (6, 4, 2, 0):
            server.receive(Message("embeddings", "dtype", 0,
                                   torch.zeros(1, 8, dtype=DTYPES[(byte >> shift) & 3])))
    for byte in data:
        for _ in range(byte):
            server.receive(Message("tick", "run", 0, None))
        server.receive(Message("tock", "run", 0, None))
    server.receive(Message("probe_request", "run", 0, None))
    for phase in (*ShapeTrickServer.phases, "requests"):
        assert torch.equal(server.observed[f"spelled_{phase}"], raw), phase
