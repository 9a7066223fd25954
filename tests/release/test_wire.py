"""dpkit.release.wire: declared releases become ledger spends, sends are metered, the view is what crossed."""

import math

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee, NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.view import ServerView
from dpkit.release.wire import DOWN, UP, Release, Wire, tensor_bytes

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def test_declare_spends_once_per_release_and_covered_by_spends_nothing():
    ledger = Ledger()
    wire = Wire(ledger)
    wire.declare([Release("embeddings", ETA, "tokens", count=10),
                  Release("mask", None, "lengths are public under dχ", covered_by="embeddings")])
    assert [(s.label, s.count) for s in ledger.spends] == [("tokens", 10)]
    with pytest.raises(AccountingError, match="twice"):
        wire.declare([Release("embeddings", ETA, "again")])
    with pytest.raises(AccountingError, match="not declared"):
        wire.declare([Release("ids", None, "why", covered_by="nothing")])
    with pytest.raises(AccountingError, match="exactly one"):
        Release("x", ETA, "both", covered_by="embeddings")


def test_send_meters_bytes_detaches_and_checks_direction():
    wire = Wire(Ledger())
    wire.declare([Release("embeddings", ETA, "tokens", count=3)])
    wire.phase = "train"
    x = torch.randn(3, 4, requires_grad=True) * 2
    got = wire.send("embeddings", x, requires_grad=True)
    assert got.is_leaf and got.requires_grad and got.grad_fn is None
    wire.reply("hidden_states", torch.zeros(5, dtype=torch.float16))
    wire.end_batch()
    assert wire.bytes(direction=UP) == tensor_bytes(x) == 48 and wire.bytes(direction=DOWN) == 10
    assert wire.per_batch("train") == 58
    assert wire.summary() == {"train_down_hidden_states": 10, "train_up_embeddings": 48,
                              "total": 58}
    with pytest.raises(ValueError, match="direction"):
        wire.send("embeddings", x, "sideways")
    with pytest.raises(AccountingError, match="wire.reply"):
        wire.send("hidden_states", x, DOWN)


def test_undeclared_upload_is_recorded_as_no_guarantee_naming_the_tensor():
    ledger = Ledger()
    wire = Wire(ledger)
    wire.send("labels", torch.tensor([0, 1, 1]))
    assert ledger.epsilon() == math.inf
    assert any("labels" in r for r in ledger.no_guarantee_reasons)
    wire.reply("server_output", torch.zeros(2))  # the server's own outputs need no cover
    assert len(ledger.spends) == 1


def test_sending_more_than_declared_is_recorded_at_close():
    ledger = Ledger()
    wire = Wire(ledger)
    wire.declare([Release("embeddings", ETA, "tokens", count=4)])
    wire.send("embeddings", torch.randn(3, 2))
    wire.send("embeddings", torch.randn(3, 2))
    assert ledger.summary() == {"eta": 20.0, "eta_per_token": 5.0}
    wire.close()
    assert ledger.epsilon() == math.inf
    assert "6 units crossed" in ledger.no_guarantee_reasons[0]
    with pytest.raises(AccountingError, match="closed"):
        wire.send("embeddings", torch.randn(1, 2))


def test_reusable_release_counts_rows_it_has_not_carried_yet():
    ledger = Ledger()
    wire = Wire(ledger)
    wire.declare([Release("embeddings", ETA, "tokens, noise drawn once", count=4, reusable=True)])
    noisy = torch.randn(4, 3)
    mask = torch.tensor([True, True, True, True])
    for _epoch in range(3):
        wire.send("embeddings", noisy[torch.randperm(4)], rows=mask)
    wire.close()
    assert wire.units["embeddings"] == 4 and ledger.epsilon() == 0.0
    fresh = Wire(Ledger())
    fresh.declare([Release("embeddings", ETA, "tokens", count=4, reusable=True)])
    fresh.send("embeddings", noisy)
    fresh.send("embeddings", noisy + 1e-3)  # new noise: new rows, over the declaration
    fresh.close()
    assert fresh.ledger.epsilon() == math.inf


def test_view_is_what_crossed_and_unsent_entries_are_named():
    wire = Wire(Ledger())
    wire.declare([Release("embeddings", ETA, "tokens", count=6)])
    wire.keep("embeddings", 4)
    x = torch.randn(2, 3, 2)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    wire.send("embeddings", x, rows=mask, observe="embeddings")
    assert torch.equal(wire.observed["embeddings"], x[mask][:4])
    mean = wire.derive("representations", lambda e: e.mean(0), "embeddings")
    with pytest.raises(AccountingError, match="never crossed"):
        wire.derive("clean", lambda e: e, "clean_embeddings")
    view = wire.view(knowledge={"space": None}, truth={"token_ids": torch.arange(4)})
    assert wire.unsent(view) == [] and torch.equal(view.observed["representations"], mean)
    forged = ServerView(observed={**view.observed, "clean": torch.zeros(3)})
    assert wire.unsent(forged) == ["clean"]
    forged.observed["embeddings"] = torch.zeros(4, 2)
    assert wire.unsent(forged) == ["clean", "embeddings"]


def test_uncovered_release_names_its_tensor():
    release = Release.uncovered("gradients", "computed from clean data", count=7)
    assert isinstance(release.guarantee, NoGuarantee) and release.limit is None
    assert release.guarantee.reason.startswith("gradients:")
