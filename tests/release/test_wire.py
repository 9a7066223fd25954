"""dpkit.release.wire: declared releases become ledger spends, sends are copied, counted and charged
before they cross, and what crosses is bytes."""

import math

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.base.errors import AccountingError, BudgetExceededError
from dpkit.release.meter import Meter
from dpkit.release.wire import DOWN, UP, Release, Wire, tensor_bytes
from dpkit.testing.boundary import RecordingChannel, recording_wire

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def wire_with(*releases, answer=None, ledger=None):
    return recording_wire(*releases, answer=answer, ledger=ledger, handlers=("report",))


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


def test_what_crosses_is_the_copy_the_wire_counted():
    x = torch.ones(2, 3)

    def guard(spend):  # runs while the send is charged: the caller's buffer changes meanwhile
        x.zero_()

    wire, channel = wire_with(ledger=Ledger(guard=guard))
    wire.send("labels", x)
    assert torch.equal(channel.got[0]["tensor"], torch.ones(2, 3)) and x.sum() == 0


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


def test_messages_name_the_phase_and_bytes_are_kept_apart_and_no_batch_number_crosses():
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=9),
                              Release("ids", ETA, "ids", count=9, unit="element"))
    wire.send("embeddings", torch.zeros(2, 4))                      # 32 bytes up
    wire.end_batch()
    wire.end_batch()
    wire.phase = "eval"
    wire.send("ids", torch.zeros(3, dtype=torch.int64))             # 24 bytes up
    wire.send("embeddings", torch.zeros(1, 4))                      # 16 bytes up
    assert [(m["op"], m["name"], m["phase"], m["mask"]) for m in channel.got] == [
        ("message", "embeddings", "run", None), ("message", "ids", "eval", None),
        ("message", "embeddings", "eval", None)]
    assert not any("batch" in m for m in channel.got)  # the server counts its own messages
    assert wire.bytes() == 72 and wire.bytes(direction=DOWN) == 0
    assert wire.bytes("run") == 32 and wire.bytes("eval", UP) == 40
    assert wire.bytes(name="embeddings") == 48 and wire.bytes("eval", UP, "ids") == 24
    assert wire.per_batch("run") == 16.0 and wire.per_batch("run", DOWN) == 0.0
    assert wire.per_batch("eval") == 0.0  # no batch of eval ended
    assert wire.summary() == {"eval_up_embeddings": 16, "eval_up_ids": 24,
                              "run_up_embeddings": 32, "total": 72}
    wire.end_batch()
    wire.send("ids", torch.zeros(1, dtype=torch.int64))
    assert "batch" not in channel.got[-1] and wire.per_batch("eval") == 48.0


def test_the_bytes_of_an_answer_are_those_of_its_tensors():
    answer = {"a": [torch.zeros(2, 3), (torch.zeros(4, dtype=torch.int16), 7)], "b": "text",
              "c": 5, "d": {"e": torch.zeros(1, dtype=torch.float64)}}
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3), answer=answer)
    got = wire.send("embeddings", torch.zeros(1, 2))
    assert got["c"] == 5 and got["a"][1][1] == 7
    assert wire.bytes(direction=DOWN) == 24 + 8 + 8 and wire.bytes(direction=UP) == 8


def test_the_wire_connects_once_and_counts_on_the_meter_it_was_given():
    ledger = Ledger()
    meter = Meter(ledger)
    channels = []

    def connect():
        channels.append(RecordingChannel(ledger))
        return channels[-1]

    wire = Wire(meter, connect=connect)
    wire.declare([Release("embeddings", ETA, "tokens", count=3)])
    assert meter.releases["embeddings"] is wire.releases["embeddings"]
    assert wire.spends["embeddings"] is meter.spends["embeddings"]
    for _ in range(3):
        wire.send("embeddings", torch.zeros(1, 2))
    assert len(channels) == 1 and len(channels[0].got) == 3
    assert meter.units["embeddings"] == 3 and wire.units["embeddings"] == 3
    wire.close()
    assert meter.closed is True


def test_the_refusals_of_a_wire_say_what_to_do():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3))
    with pytest.raises(AttributeError, match="^a wire's ledger belongs to the runner and cannot be "
                       "replaced; the runner settles the ledger it bound$"):
        wire.ledger = Ledger()
    with pytest.raises(AccountingError, match="^this wire is not connected to a server; send "
                       "through ctx.wire, the wire the runner gave the cell$"):
        Wire(Ledger()).channel()


def test_answers_to_a_cpu_client_are_the_decoded_tensors():
    wire, _ = wire_with(Release("embeddings", ETA, "tokens", count=3),
                        answer={"pooled": torch.ones(2)})
    assert wire.send("report")["pooled"].device.type == "cpu" and wire.device is None
    wire.send("embeddings", torch.zeros(1, 2))
    assert wire.device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_answers_come_back_on_the_device_the_client_sends_from():
    wire, channel = wire_with(Release("embeddings", ETA, "tokens", count=3, reusable=True),
                              answer={"pooled": torch.ones(2), "rows": [torch.zeros(1)]})
    got = wire.send("embeddings", torch.arange(4.0, device="cuda").reshape(2, 2))
    assert torch.equal(channel.got[0]["tensor"], torch.arange(4.0).reshape(2, 2))
    assert got["pooled"].is_cuda and got["rows"][0].is_cuda and wire.device.type == "cuda"
    assert wire.units["embeddings"] == 2
    assert wire.send("report")["pooled"].is_cuda  # a request answers on the client's device
    assert not wire.send("embeddings", torch.zeros(1, 2))["pooled"].is_cuda
    assert wire.device.type == "cuda"  # the first send's device
