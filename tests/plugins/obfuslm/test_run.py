"""ObfusLM's classification run on a tiny cell, its sends recorded: the declaration comes first,
the obfuscated tables (drawn from the run's noise secret) go up once, each split's ids go up
through the secret key with the declared padding, labels only for training and validation; the
ledger counts exactly what crossed, and the attacks' truth is the documents as sent, decoded."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import ID_PADDING, obfuscate_model, padded_ids
from dpkit_obfuslm.defense import _prepared
from dpkit_obfuslm.params import ObfuscationParams

from dpkit.models import tiny_encoder
from tests.plugins.obfuslm.conftest import make_ctx, tiny_corpus

TRAIN = {"epochs": 1, "batch_size": 16, "max_train": 12, "validation_size": 3, "max_test": 5,
         "max_length": 12, "attack_docs": 18}
CELLS = {"obfuslm": {"k": 3, "beta": 0.9, "epsilon": 0.5, **TRAIN},
         "obfuslm_plus": {"k": 3, "beta": 0.9, "epsilon": 0.5, "plus": True, "k_star": 4, **TRAIN},
         "obfuslm_plaintext": TRAIN}
SECRET = "the client's secret"
tiny_encoder(hidden_size=32)  # built at collection (then cached), not in each forked test run


class Cell:
    """One run of a classification defense with every send (phase, name, tensor) recorded."""

    def __init__(self, model, data, label: str) -> None:
        self.model, self.data, self.sent = model, data, []
        self.ctx = make_ctx(model, data)
        self.ctx.noise_secret = SECRET
        self.params = CELLS[label]
        self.defense = self.ctx.registry.build("defense", label.replace("_plus", ""), self.params)
        self.declared_before_sending: list[str] | None = None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(self.ctx.wire, "send", self.send)
            self.result = self.defense.run(self.ctx)

    def send(self, name, tensor=None):
        if self.declared_before_sending is None:
            self.declared_before_sending = [s.label for s in self.ctx.ledger.spends]
        self.sent.append((self.ctx.wire.phase, name, tensor))
        return type(self.ctx.wire).send(self.ctx.wire, name, tensor)

    def prepared(self):
        """What the defense prepared for this run (its key, its encoded splits)."""
        obfuscation = self.defense.params if "k" in self.params else None
        return _prepared(self.defense, self.ctx, obfuscation)


@pytest.fixture
def cells(encoder):
    """Runs a cell inside each test (not once per module: mutation testing maps each test to
    the functions it runs)."""
    return lambda label: Cell(encoder, tiny_corpus(24), label)


def texts(data, split, start, stop):
    return list(data[split].texts[start:stop]), list(data[split].labels[start:stop])


@pytest.mark.parametrize("label", list(CELLS))
def test_the_run_sends_each_split_once_with_labels_only_to_train_on(cells, label):
    cell = cells(label)
    names = [(phase, name) for phase, name, _ in cell.sent]
    tables = [("run", "tables")] + ([("run", "hidden_layers")] if "plus" in label else [])
    if label == "obfuslm_plaintext":
        tables = []
    assert names == [*tables, ("train", "token_ids"), ("train", "labels"),
                     ("validation", "token_ids"), ("validation", "labels"),
                     ("test", "token_ids"), ("run", "fine_tune"), ("run", "predictions")]
    assert cell.declared_before_sending == [s.label for s in cell.ctx.ledger.spends]


@pytest.mark.parametrize("label", list(CELLS))
def test_the_ids_sent_are_each_splits_texts_through_the_secret_key(cells, label):
    cell = cells(label)
    key = cell.prepared().key
    client = ObfusClient(cell.model, key, TRAIN["max_length"])
    splits = {"train": texts(cell.data, "train", 0, 12), "validation": texts(cell.data, "train", 12, 15),
              "test": texts(cell.data, "test", 0, 5)}
    sent = {(phase, name): tensor for phase, name, tensor in cell.sent}
    documents = []
    for split, (docs, labels) in splits.items():
        expected = client.tokenize(docs, labels)
        assert torch.equal(sent[split, "token_ids"], padded_ids(expected.ids, expected.mask))
        assert bool((sent[split, "token_ids"][expected.mask == 0] == ID_PADDING).all())
        if split != "test":
            assert torch.equal(sent[split, "labels"], torch.tensor(labels))
        documents += [key.decode(d) for d in expected.documents()]
        plain = client.original_ids(docs).ids
        assert torch.equal(expected.ids, key.encode(plain))
    if label != "obfuslm_plaintext":
        assert not torch.equal(key.forward, torch.arange(len(key.forward)))
    truth = cell.result.truth
    assert torch.equal(truth["vocab_key"], key.forward)
    assert len(truth["token_ids"]) == TRAIN["attack_docs"] < len(documents)
    assert all(torch.equal(a, b) for a, b in zip(truth["token_ids"], documents))


@pytest.mark.parametrize("label", list(CELLS))
def test_the_ledger_counts_exactly_the_ids_and_labels_that_crossed(cells, label):
    cell = cells(label)
    spends = {s.label.split(" (")[0]: s for s in cell.ctx.ledger.spends}
    real_ids = sum(int((t != ID_PADDING).sum()) for _, name, t in cell.sent if name == "token_ids")
    assert cell.ctx.wire.units["token_ids"] == real_ids
    counts = {name: r.count for name, r in cell.ctx.wire.releases.items()}
    assert counts["token_ids"] == real_ids and counts["labels"] == 12 + 3
    assert cell.ctx.wire.units["labels"] == 15
    assert not any("over declaration" in label for label in spends)
    assert cell.result.wire_bytes == cell.ctx.wire.summary() and cell.result.training_curves
    m = cell.result.metrics
    assert m["train_examples"] == 12 and m["validation_examples"] == 3


@pytest.mark.parametrize("label", ["obfuslm", "obfuslm_plus"])
def test_the_tables_sent_are_the_obfuscation_drawn_from_the_noise_secret(cells, label):
    cell = cells(label)
    ctx = make_ctx(cell.model, cell.data)
    ctx.noise_secret = SECRET
    params = ObfuscationParams(**{k: v for k, v in cell.params.items()
                                  if k in ObfuscationParams.model_fields})
    tables, metrics, sent = obfuscate_model(ctx, cell.model, params)
    recorded = {name: tensor for _, name, tensor in cell.sent}
    assert set(sent) <= set(recorded)
    assert all(torch.equal(recorded[name], tensor) for name, tensor in sent.items())
    assert torch.equal(cell.prepared().key.forward, tables.key.forward)
    reported = {k: v for k, v in cell.result.metrics.items() if k in metrics and k != "obfuscate_s"}
    assert reported == {k: v for k, v in metrics.items() if k != "obfuscate_s"}
    assert math.isfinite(cell.result.metrics["k_achieved"])


def test_a_causal_model_is_refused_with_the_fix():
    from dpkit.models import tiny_causal

    ctx = make_ctx(tiny_causal(hidden_size=16), tiny_corpus(8))
    defense = ctx.registry.build("defense", "obfuslm", CELLS["obfuslm"])
    with pytest.raises(ValueError, match=r"^obfuslm classification needs an encoder model \(e\.g\. "
                                         r"minilm or tiny-encoder\) as the spec's model$"):
        defense.run(ctx)


def test_bf16_on_a_cpu_that_emulates_it_is_warned_of(encoder, monkeypatch):
    from dpkit.ml import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    precision._warn.cache_clear()
    try:
        ctx = make_ctx(encoder, tiny_corpus(24))
        defense = ctx.registry.build("defense", "obfuslm", {**CELLS["obfuslm"], "precision": "bf16"})
        with pytest.warns(RuntimeWarning, match=r"^obfuslm: precision 'bf16' on a CPU without"):
            _prepared(defense, ctx, defense.params)
    finally:
        precision._warn.cache_clear()
