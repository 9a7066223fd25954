"""dpkit.release.wire: declared releases become ledger spends, sends are copied, counted and charged
before they cross, and what crosses is bytes."""

import math

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.base.errors import AccountingError, BudgetExceededError
from dpkit.testing.boundary import recording_wire
from dpkit.release.wire import DOWN, UP, Release, Wire, tensor_bytes

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def wire_with(*releases, answer=None, ledger=None):
    return recording_wire(*releases, answer=answer, ledger=ledger)


def test_declare_spends_once_per_release_and_refuses_a_second_declaration():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=10))
    assert [(s.label, s.count) for s in wire.ledger.spends] == [("tokens", 10)]
    with pytest.raises(AccountingError, match="twice"):
        wire.declare([Release("embeddings", ETA, "again")])
    with pytest.raises(AccountingError, match="Release.uncovered"):
        Release("mask", None, "no guarantee")
    with pytest.raises(TypeError):
        Release("mask", ETA, "a companion", covered_by="embeddings")


def test_send_copies_counts_meters_and_returns_the_answer():
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=3),
                              answer={"pooled": torch.ones(2, 5, dtype=torch.float16)})
    wire.phase = "train"
    x = torch.randn(3, 4, requires_grad=True) * 2
    got = wire.send("embeddings", x)
    x.data.mul_(0)  # the client reuses its buffer: what crossed does not change
    assert channel.got[0]["tensor"].abs().sum() > 0 and not channel.got[0]["tensor"].requires_grad
    assert got["pooled"].dtype == torch.float16 and got["pooled"].shape == (2, 5)
    wire.end_batch()
    assert wire.bytes(direction=UP) == tensor_bytes(x) == 48 and wire.bytes(direction=DOWN) == 20
    assert wire.per_batch("train") == 68
    assert wire.summary() == {"train_down_embeddings": 20, "train_up_embeddings": 48, "total": 68}
    assert wire.units["embeddings"] == 3


def test_undeclared_upload_is_charged_infinite_before_it_crosses():
    wire, channel = wire_with()
    wire.send("labels", torch.tensor([0, 1, 1]))
    assert channel.infinite_then == [True]
    assert any("labels" in r and "without a declared release" in r
               for r in wire.ledger.no_guarantee_reasons)


def test_units_beyond_a_declaration_are_charged_before_they_cross():
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=4))
    wire.send("embeddings", torch.randn(3, 2))
    assert channel.infinite_then == [False]
    wire.send("embeddings", torch.randn(2, 2))  # 5 > 4
    assert channel.infinite_then[-1] is True
    assert any("5 units crossed" in r for r in wire.ledger.no_guarantee_reasons)


def test_a_refused_excess_never_crosses():
    ledger = Ledger(ceiling={"epsilon": 1.0})
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=2), ledger=ledger)
    with pytest.raises(BudgetExceededError):
        wire.send("embeddings", torch.randn(3, 2))
    assert channel.got == [] and wire.units.get("embeddings", 0) == 0


def test_a_release_with_count_zero_carries_nothing_whatever_it_covers():
    wire, channel = wire_with(Release("extra", ETA, "free", count=0, covers=1000))
    assert len(wire.ledger.spends) == 0
    wire.send("extra", torch.randn(1, 2))
    assert channel.infinite_then == [True]


def test_padding_is_verified_by_the_wire_and_closes_each_sequence():
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=3, padding=0.0))
    batch = torch.randn(2, 3, 4)
    batch[0, 2] = 0.0
    batch[1, 1:] = 0.0
    wire.send("embeddings", batch)
    assert wire.units["embeddings"] == 3
    assert channel.got[0]["mask"].tolist() == [[True, True, False], [True, False, False]]
    gap = torch.randn(1, 3, 4)
    gap[0, 0] = 0.0  # a padding row before real ones
    with pytest.raises(AccountingError, match="padding must close"):
        wire.send("embeddings", gap)


def test_rows_that_only_look_like_padding_count():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=2, padding=0.0))
    hidden = torch.zeros(1, 3, 4)
    hidden[0, :, 0] = 1e-30  # not the padding value: real rows, counted
    wire.send("embeddings", hidden)
    assert wire.units["embeddings"] == 3 and wire.ledger.epsilon() == math.inf


def test_groups_are_counted_from_the_verified_padding():
    release = Release("docs", MetricDpGuarantee(2.0, "l2", "x", "sequence"), "documents",
                      count=2, unit="group", padding=-1)
    wire, channel = wire_with(release)
    wire.send("docs", torch.tensor([[3, 4, -1], [-1, -1, -1], [5, -1, -1]]))
    assert wire.units["docs"] == 2


def test_reusable_rows_count_once_per_content():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3, reusable=True))
    rows = torch.randn(3, 2)
    for _ in range(4):
        wire.send("embeddings", rows)
    assert wire.units["embeddings"] == 3
    wire.send("embeddings", torch.cat([rows[:1], rows[:1]]))  # a second copy of one row
    assert wire.units["embeddings"] == 4


def test_no_caller_supplied_structure_and_no_client_side_replies():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3))
    with pytest.raises(TypeError):
        wire.send("embeddings", torch.randn(3, 2), rows=torch.ones(3, dtype=torch.bool))
    for gone in ("reply", "derive", "view", "observed", "keep"):
        assert not hasattr(wire, gone), gone


def test_the_ledger_of_a_wire_cannot_be_replaced_and_a_closed_wire_sends_nothing():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3))
    with pytest.raises(AttributeError, match="runner"):
        wire.ledger = Ledger()
    wire.close()
    with pytest.raises(AccountingError, match="closed"):
        wire.send("embeddings", torch.randn(1, 2))


def test_a_wire_without_a_server_declares_but_cannot_send():
    wire = Wire(Ledger())
    wire.declare([Release("embeddings", ETA, "tokens", count=3)])
    with pytest.raises(AccountingError, match="not connected"):
        wire.send("embeddings", torch.randn(1, 2))
