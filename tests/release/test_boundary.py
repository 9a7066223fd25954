"""The wire is a boundary (issue 30): each shortcut a plug-in could take through the public API
either raises a clear error or ends with an ∞ (or correctly counted) ledger entry."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.wire import Release, Wire

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def _wire(*releases: Release) -> Wire:
    wire = Wire(Ledger())
    wire.declare(list(releases))
    return wire


def test_1_uncovered_release_with_count_zero_still_records_infinity():
    wire = _wire(Release.uncovered("labels", "plaintext labels", count=0))
    assert wire.ledger.epsilon() == math.inf and "labels" in wire.ledger.no_guarantee_reasons[0]
    wire.send("labels", torch.arange(50))
    wire.close()
    assert len(wire.ledger.spends) == 1  # one ∞ entry, however much crossed under it


def test_2_reusable_rows_are_counted_with_multiplicity():
    wire = _wire(Release("ids", ETA, "tokens", count=3, reusable=True))
    ids = torch.tensor([[4], [4], [4], [4], [7], [7], [7], [7]])   # 8 tokens, 2 distinct values
    wire.send("ids", ids)
    assert wire.units["ids"] == 8
    wire.send("ids", ids[torch.randperm(8)])                      # the same rows again: free
    assert wire.units["ids"] == 8
    wire.close()
    assert wire.ledger.epsilon() == math.inf and "8 units crossed" in wire.ledger.no_guarantee_reasons[0]


def test_4_units_are_counted_by_the_wire_not_the_caller():
    wire = _wire(Release("embeddings", ETA, "tokens", count=2))
    with pytest.raises(AccountingError, match="counts 5"):
        wire.send("embeddings", torch.randn(5, 3), units=0)
    with pytest.raises(AccountingError, match="wire.reply"):
        wire.send("embeddings", torch.randn(5, 3), "down")


def test_4_each_unit_kind_is_measured_from_what_is_sent():
    wire = _wire(Release("table", ETA, "one table", count=1, unit="send"),
                 Release("ids", ETA, "token ids", count=6, unit="element"),
                 Release("docs", ETA, "documents", count=2, unit="group"))
    wire.send("table", torch.randn(100, 8))
    mask = torch.tensor([[True, True, False], [True, True, True]])
    wire.send("ids", torch.ones(2, 3, dtype=torch.long), rows=mask)
    wire.send("docs", torch.randn(5, 4), groups=[2, 0, 3])
    with pytest.raises(AccountingError, match="add up to 4 but 5 rows"):
        wire.send("docs", torch.randn(5, 4), groups=[2, 2])
    with pytest.raises(AccountingError, match="groups="):
        wire.send("docs", torch.randn(5, 4))
    wire.close()
    assert dict(wire.units) == {"table": 1, "ids": 5, "docs": 2}
    assert wire.ledger.epsilon() == 0.0


def test_5_the_view_cannot_be_written_and_derive_cannot_smuggle_a_tensor():
    wire = _wire(Release("embeddings", ETA, "tokens", count=4))
    noisy, clean = torch.randn(4, 2), torch.randn(4, 2)
    wire.send("embeddings", noisy, observe="embeddings")
    with pytest.raises(TypeError):
        wire.observed["embeddings"] = clean  # type: ignore[index]
    wire.derive("pooled", lambda e: e.mean(0), "embeddings")
    assert wire.ledger.epsilon() == 0.0
    wire.derive("recovered", lambda e: clean, "embeddings")
    assert wire.ledger.epsilon() == math.inf
    assert "captured 1 tensor(s) that never crossed" in wire.ledger.no_guarantee_reasons[0]
    assert wire.derived["recovered"].foreign_tensors == 1


def test_5_server_state_is_vouched_for_by_name():
    wire = _wire(Release("ids", ETA, "tokens", count=3))
    wire.send("ids", torch.arange(3), observe="ids")
    server_model = torch.randn(10, 4)
    wire.derive("table", lambda _ids: server_model, "ids", server_state={"model": server_model})
    assert wire.ledger.epsilon() == 0.0 and wire.derived["table"].server_state == ("model",)
