"""dpkit.release.meter: each declaration is one ledger spend with its guarantee, label and count;
each send is counted exactly, and what no declaration covers is one ∞ entry naming it."""

import re

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee, NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.declaration import Release
from dpkit.release.meter import DOWN, UP, Meter, tensor_bytes

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def test_each_declaration_is_one_spend_with_its_guarantee_label_and_count():
    ledger = Ledger()
    meter = Meter(ledger)
    recorded = meter.declare([Release("embeddings", ETA, "tokens", count=7),
                              Release("table", ETA, "one table", count=1, unit="send"),
                              Release.uncovered("labels", "plaintext labels", count=0),
                              Release.uncovered("ids", "raw ids", count=5),
                              Release("extra", ETA, "free", count=0, covers=9)])
    expected = [(ETA, "tokens", 7), (ETA, "one table", 1),
                (NoGuarantee("labels: plaintext labels"), "labels (no guarantee)", 1),
                (NoGuarantee("ids: raw ids"), "ids (no guarantee)", 5)]
    assert [tuple(s) for s in recorded] == [tuple(s) for s in ledger.spends] == expected
    assert dict(meter.spends) == dict(zip(["embeddings", "table", "labels", "ids"], recorded))
    assert list(meter.releases) == ["embeddings", "table", "labels", "ids", "extra"]
    assert meter.ledger is ledger and meter.excess() == []


def test_declare_refuses_what_is_not_a_release_and_a_second_declaration():
    meter = Meter(Ledger())
    with pytest.raises(AccountingError, match=re.escape(
            "declare takes dpkit.Release objects, got ('embeddings', 3)")):
        meter.declare([("embeddings", 3)])
    meter.declare([Release("embeddings", ETA, "tokens", count=3)])
    with pytest.raises(AccountingError, match=re.escape(
            "release 'embeddings' is declared twice; give each tensor that crosses the wire one "
            "release")):
        meter.declare([Release("embeddings", ETA, "again")])
    assert len(meter.ledger.spends) == 1 and meter.releases["embeddings"].label == "tokens"


def test_an_undeclared_send_is_its_own_infinite_release_and_is_counted():
    ledger = Ledger()
    meter = Meter(ledger)
    assert meter.admit("labels", torch.tensor([0, 1, 1])) is None
    assert meter.releases["labels"].is_uncovered
    assert [(s.label, s.count) for s in ledger.spends] == [("labels (no guarantee)", 1)]
    assert ledger.no_guarantee_reasons == ["labels: sent to the server without a declared release"]
    assert meter.units["labels"] == 3 and meter.messages["labels"] == 1
    meter.admit("labels", torch.tensor([2, 2]))
    assert len(ledger.spends) == 1 and meter.units["labels"] == 5 and meter.messages["labels"] == 2


def test_units_up_to_the_limit_are_covered_and_the_excess_is_one_infinite_entry():
    ledger = Ledger()
    meter = Meter(ledger)
    meter.declare([Release("b", ETA, "bs", count=1), Release("a", ETA, "as", count=2, covers=4)])
    meter.admit("a", torch.randn(3, 2))
    meter.admit("a", torch.randn(1, 2))  # 4 = covers: still covered
    meter.admit("b", torch.randn(1, 2))
    assert ledger.no_guarantee_reasons == [] and meter.excess() == []
    meter.admit("b", torch.randn(2, 2))
    meter.admit("b", torch.randn(1, 2))  # over again: no second entry
    meter.admit("a", torch.randn(1, 2))
    assert ledger.no_guarantee_reasons == [
        "b: 3 units crossed the wire but the release declared 1; the excess is not covered",
        "a: 5 units crossed the wire but the release declared 4; the excess is not covered"]
    assert [s.label for s in ledger.spends[2:]] == ["b (over declaration)", "a (over declaration)"]
    assert meter.excess() == ["a", "b"]
    assert dict(meter.units) == {"a": 5, "b": 4} and dict(meter.messages) == {"a": 3, "b": 3}


def test_a_request_carries_no_units_and_records_nothing():
    ledger = Ledger()
    meter = Meter(ledger)
    assert meter.admit("report", None) is None
    assert meter.admit("report", None) is None
    assert meter.messages["report"] == 2 and "report" not in meter.units
    assert "report" not in meter.releases and len(ledger.spends) == 0


def test_a_closed_meter_admits_nothing():
    meter = Meter(Ledger())
    meter.declare([Release("embeddings", ETA, "tokens", count=3)])
    meter.closed = True
    for tensor in (torch.randn(1, 2), None):
        with pytest.raises(AccountingError, match=re.escape(
                "the wire is closed; 'embeddings' was sent after the run ended")):
            meter.admit("embeddings", tensor)
    assert dict(meter.units) == {} and dict(meter.messages) == {}


def test_reusable_padded_rows_count_only_their_real_rows():
    meter = Meter(Ledger())
    meter.declare([Release("embeddings", ETA, "tokens", count=4, reusable=True, padding=0.0)])
    batch = torch.randn(2, 3, 2)
    batch[0, 2] = 0.0
    batch[1, 1:] = 0.0
    mask = meter.admit("embeddings", batch)
    assert mask.tolist() == [[True, True, False], [True, False, False]]
    assert meter.units["embeddings"] == 3
    meter.admit("embeddings", batch.flip(0))
    assert meter.units["embeddings"] == 3 and meter.ledger.no_guarantee_reasons == []


def test_reusable_elements_of_a_vector_are_rows_of_one_value():
    meter = Meter(Ledger())
    meter.declare([Release("ids", ETA, "ids", count=3, reusable=True)])
    meter.admit("ids", torch.tensor([4, 4, 7]))
    meter.admit("ids", torch.tensor([7, 4]))
    assert meter.units["ids"] == 3
    meter.admit("ids", torch.tensor([9]))
    assert meter.units["ids"] == 4 and len(meter.ledger.no_guarantee_reasons) == 1


def test_reusable_rows_are_told_apart_by_their_whole_content():
    meter = Meter(Ledger())
    meter.declare([Release("rows", ETA, "rows", count=9, reusable=True)])
    meter.admit("rows", torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 4.0]]))
    meter.admit("rows", torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 2.0, 4.0]]))
    assert meter.units["rows"] == 4


def test_bytes_add_up_per_phase_direction_and_name():
    meter = Meter(Ledger())
    meter.meter("train", UP, "embeddings", 48)
    meter.meter("train", UP, "embeddings", 16)
    meter.meter("train", DOWN, "embeddings", 8)
    assert dict(meter.totals) == {("train", "up", "embeddings"): 64,
                                  ("train", "down", "embeddings"): 8}
    assert tensor_bytes(torch.zeros(3, 4, dtype=torch.float16)) == 24
    assert tensor_bytes(torch.zeros(5, dtype=torch.int64)) == 40


def test_reusable_rows_are_remembered_per_release():
    meter = Meter(Ledger())
    meter.declare([Release("keys", ETA, "keys", count=2, reusable=True),
                   Release("values", ETA, "values", count=2, reusable=True)])
    rows = torch.randn(2, 3)
    meter.admit("keys", rows)
    meter.admit("values", rows)  # the same content under another release is another release's
    meter.admit("keys", rows)
    assert dict(meter.units) == {"keys": 2, "values": 2}
