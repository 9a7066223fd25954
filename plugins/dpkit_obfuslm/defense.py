"""Classification defenses: ObfusLM (obfuscated fine-tuning + inference) and its plaintext baseline.

The client (here) tokenizes, obfuscates and sends; the server part
(:class:`dpkit_obfuslm.server.ClassifierServer`, in its own process) fine-tunes and predicts; the
client scores the predictions and holds the truth the attacks are scored against.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import ClassVar

import dpkit
from dpkit import TrainingCurve, attach_curves, declare_releases
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import obfuscate_model, padded_ids, releases
from dpkit_obfuslm.obfuscate import VocabKey
from dpkit_obfuslm.params import ObfuscationParams, ObfusLMParams, TrainParams
from dpkit_obfuslm.server import ClassifierServer


def _split(ctx, p: TrainParams):
    data = ctx.dataset
    train, test = data["train"], data["test"]
    if train.labels is None or test.labels is None:
        raise ValueError(f"obfuslm needs a labelled dataset; {data.name!r} has no labels — "
                         "use e.g. rotten_tomatoes")
    available = len(train)
    wanted = available if p.max_train is None else min(p.max_train, available)
    n_val = p.validation_size or math.ceil(p.validation_share * wanted)
    n_train = min(wanted, available - n_val)
    if n_train < 2:
        raise ValueError(f"obfuslm: {available} train texts leave {n_train} to fine-tune on after "
                         f"{n_val} validation texts; use a larger dataset or a smaller "
                         "validation_size / validation_share")
    n_test = len(test) if p.max_test is None else min(p.max_test, len(test))
    val = slice(n_train, n_train + n_val)
    return (train.texts[:n_train], train.labels[:n_train], train.texts[val], train.labels[val],
            test.texts[:n_test], test.labels[:n_test])


def _prepared(defense, ctx, obfuscation: ObfuscationParams | None) -> SimpleNamespace:
    """Data, the obfuscated tables and the encoded splits, once per run."""
    return ctx.prepared(defense, lambda: _prepare(defense, ctx, obfuscation))


def _prepare(defense, ctx, obfuscation: ObfuscationParams | None) -> SimpleNamespace:
    p, model = defense.params, ctx.model
    dpkit.warn_if_bf16_is_emulated(ctx.device.type, p.precision, defense.name)
    if model is None or model.causal:
        raise ValueError("obfuslm classification needs an encoder model (e.g. minilm or "
                         "tiny-encoder) as the spec's model")
    x_train, y_train, x_val, y_val, x_test, y_test = _split(ctx, p)
    tables, metrics, sent = None, {}, {}
    if obfuscation is not None:
        tables, metrics, sent = obfuscate_model(ctx, model, obfuscation)
    key = tables.key if tables is not None else VocabKey.identity(model.vocab_size)
    client = ObfusClient(model, key, p.max_length)
    return SimpleNamespace(
        tables=tables, metrics=metrics, sent=sent, key=key,
        train=client.tokenize(x_train, y_train), validation=client.tokenize(x_val, y_val),
        test=client.tokenize(x_test, y_test))


def classification_releases(defense, ctx, obfuscation: ObfuscationParams | None) -> list:
    """Tables ((k, ε) per token), the padded id streams and the labels (∞ with reasons); the
    validation texts are sent like the training ones (ids, labels), the test texts' labels never."""
    st = _prepared(defense, ctx, obfuscation)
    n_ids = int(st.train.mask.sum() + st.validation.mask.sum() + st.test.mask.sum())
    return releases(st.tables, obfuscation, n_ids, len(st.train) + len(st.validation))


def run_classification(defense, ctx, obfuscation: ObfuscationParams | None) -> dpkit.DefenseResult:
    """Obfuscate (or not) and send through ``ctx.wire``; the server fine-tunes and predicts; score
    the predictions and keep the truth of the documents the attacks see."""
    declare_releases(defense, ctx)
    p, wire = defense.params, ctx.wire
    st = _prepared(defense, ctx, obfuscation)
    metrics = dict(st.metrics)
    for name, tensor in st.sent.items():  # the obfuscated tables (and ObfusLM+'s layers)
        wire.send(name, tensor)
    splits = (("train", st.train), ("validation", st.validation), ("test", st.test))
    for phase, split in splits:
        wire.phase = phase
        wire.send("token_ids", padded_ids(split.ids, split.mask))
        if phase != "test":
            wire.send("labels", split.labels)
    wire.phase = "run"
    report = wire.send("fine_tune")
    curve = TrainingCurve.from_dict(report["curve"])
    metrics.update(_scores(report, curve, wire.send("predictions"), st, p))
    documents = [doc for _, split in splits for doc in split.documents()][:p.attack_docs]
    truth = {"token_ids": [st.key.decode(doc) for doc in documents], "vocab_key": st.key.forward}
    result = dpkit.DefenseResult(metrics=metrics, truth=truth, wire_bytes=wire.summary())
    attach_curves(result, [curve])
    return result


def _scores(report: dict, curve: TrainingCurve, predictions, st: SimpleNamespace,
            p: TrainParams) -> dict[str, float]:
    """The fine-tuning's loss, time, sizes and epochs, and the test accuracy of the predictions."""
    return {"train_loss": curve.final_train, "train_s": float(report["train_s"]),
            "train_examples": float(len(st.train)), "validation_examples": float(len(st.validation)),
            **_epochs(curve, p, len(st.train)),
            "accuracy": float((predictions.cpu() == st.test.labels).float().mean())}


def _epochs(curve, p: TrainParams, n_train: int) -> dict[str, float]:
    """Epochs trained and, with patience, the epoch of the kept model (fractional when the
    server validates every ``validate_every`` texts)."""
    per_round = (p.validate_every or n_train) / n_train
    out = {"epochs_trained": min(len(curve.steps) * per_round, float(p.epochs))}
    if curve.best_step is not None:
        out["best_epoch"] = curve.best_step * per_round
    return out


class ObfusLM(dpkit.Component):
    """ObfusLM (classification): permuted vocabulary, EmbedCluster + WeightSynth tables, server
    fine-tuning on obfuscated ids; ``plus`` adds the hidden-dimension obfuscation."""

    name: ClassVar[str] = "obfuslm"
    Params: ClassVar[type[ObfusLMParams]] = ObfusLMParams
    server: ClassVar[type[dpkit.Server]] = ClassifierServer

    def releases(self, ctx) -> list[dpkit.Release]:
        """The obfuscated tables ((k, ε)), the id stream and the labels (∞ with reasons)."""
        return classification_releases(self, ctx, self.params)

    def run(self, ctx) -> dpkit.DefenseResult:
        """Obfuscate, send, let the server fine-tune and predict, score; the (k, ε)-anonymity
        spend is declared first."""
        return run_classification(self, ctx, self.params)


class ObfusLMPlaintext(dpkit.Component):
    """Plaintext baseline for ObfusLM: the same fine-tuning on real ids (no protection)."""

    name: ClassVar[str] = "obfuslm_plaintext"
    Params: ClassVar[type[TrainParams]] = TrainParams
    server: ClassVar[type[dpkit.Server]] = ClassifierServer

    def releases(self, ctx) -> list[dpkit.Release]:
        """The real id stream and the labels, each ε = ∞ with its reason."""
        return classification_releases(self, ctx, None)

    def run(self, ctx) -> dpkit.DefenseResult:
        """Fine-tune and evaluate on plaintext; the ledger records ε = ∞ with the reason."""
        return run_classification(self, ctx, None)
