"""The wire is a boundary: each shortcut a plug-in could take through the public API either raises
a clear error or ends with an ∞ (or correctly counted) ledger entry. (The end-to-end cases, through
the runner and a real server process, are in tests/boundary/test_adversaries.py.)"""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.accounting import MetricDpGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.wire import Release
from dpkit.testing.boundary import recording_wire

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def test_1_uncovered_release_with_count_zero_still_records_infinity():
    wire, _ = recording_wire(Release.uncovered("labels", "plaintext labels", count=0))
    assert wire.ledger.epsilon() == math.inf and "labels" in wire.ledger.no_guarantee_reasons[0]
    wire.send("labels", torch.arange(50))
    wire.close()
    assert len(wire.ledger.spends) == 1  # one ∞ entry, however much crossed under it


def test_2_reusable_rows_are_counted_with_multiplicity():
    wire, _ = recording_wire(Release("ids", ETA, "tokens", count=3, reusable=True))
    ids = torch.tensor([[4], [4], [4], [4], [7], [7], [7], [7]])   # 8 tokens, 2 distinct values
    wire.send("ids", ids)
    assert wire.units["ids"] == 8
    wire.send("ids", ids[torch.randperm(8)])                      # the same rows again: free
    assert wire.units["ids"] == 8
    assert wire.ledger.epsilon() == math.inf and "8 units crossed" in wire.ledger.no_guarantee_reasons[0]


def test_3_the_direction_is_the_call_and_units_are_the_wires():
    wire, _ = recording_wire(Release("embeddings", ETA, "tokens", count=2))
    with pytest.raises(TypeError):
        wire.send("embeddings", torch.randn(5, 3), units=0)
    with pytest.raises(TypeError):
        wire.send("embeddings", torch.randn(5, 3), "down")


def test_4_each_unit_kind_is_measured_from_what_is_sent():
    wire, _ = recording_wire(Release("table", ETA, "one table", count=1, unit="send"),
                             Release("ids", ETA, "token ids", count=6, unit="element", padding=-1),
                             Release("docs", ETA, "documents", count=2, unit="group", padding=0.0))
    wire.send("table", torch.randn(100, 8))
    wire.send("ids", torch.tensor([[1, 1, -1], [1, 1, 1]]))
    docs = torch.randn(3, 2, 4)
    docs[1] = 0.0   # an empty document
    docs[2, 1] = 0.0
    wire.send("docs", docs)
    with pytest.raises(AccountingError, match="groups along the first"):
        wire.send("docs", torch.randn(4))
    assert dict(wire.units) == {"table": 1, "ids": 5, "docs": 2}
    assert wire.ledger.epsilon() == 0.0


def test_5_requests_carry_no_tensor_and_answers_come_back_as_data():
    wire, channel = recording_wire(answer={"n": 3, "rows": torch.ones(2, 2)},
                                   handlers=("report",))
    answer = wire.send("report")
    assert channel.got[0]["tensor"] is None and answer["n"] == 3
    assert torch.equal(answer["rows"], torch.ones(2, 2)) and len(wire.ledger.spends) == 0
