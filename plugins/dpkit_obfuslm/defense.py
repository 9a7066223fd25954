"""Classification defenses: ObfusLM (obfuscated fine-tuning + inference) and its plaintext baseline."""

from __future__ import annotations

import copy
import math
import time
from types import SimpleNamespace
from typing import ClassVar

import torch

import dpkit
from dpkit import attach_curves, declare_releases
from dpkit_obfuslm.classify import EncoderClassifier, fine_tune, predict
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import (
    ObfuscationParams,
    build_view,
    obfuscate_model,
    obfuscation_knowledge,
    public_documents,
    releases,
    send_model,
)
from dpkit_obfuslm.obfuscate import VocabKey
from dpkit_obfuslm.params import ObfusLMParams, TrainParams


def _split(ctx, p: TrainParams):
    data = ctx.dataset
    train, test = data["train"], data["test"]
    if train.labels is None or test.labels is None:
        raise ValueError(f"obfuslm needs a labelled dataset; {data.name!r} has no labels — "
                         "use e.g. rotten_tomatoes")
    n_public = 0 if p.public_dataset else int(len(train) * p.public_share)
    available = len(train) - n_public
    wanted = available if p.max_train is None else min(p.max_train, available)
    n_val = p.validation_size or math.ceil(p.validation_share * wanted)
    n_train = min(wanted, available - n_val)
    if n_train < 2:
        raise ValueError(f"obfuslm: {available} train texts leave {n_train} to fine-tune on after "
                         f"{n_val} validation texts; use a larger dataset or a smaller "
                         "validation_size / validation_share / public_share")
    n_test = len(test) if p.max_test is None else min(p.max_test, len(test))
    held_out = train.texts[len(train) - n_public:] if n_public else []
    val = slice(n_train, n_train + n_val)
    return (train.texts[:n_train], train.labels[:n_train], train.texts[val], train.labels[val],
            test.texts[:n_test], test.labels[:n_test], held_out,
            len(data.label_names or set(train.labels)))


def _prepared(defense, ctx, obfuscation: ObfuscationParams | None) -> SimpleNamespace:
    """Data, the server's model copy, the obfuscated tables and the encoded splits, once per run."""
    return ctx.prepared(defense, lambda: _prepare(defense, ctx, obfuscation))


def _prepare(defense, ctx, obfuscation: ObfuscationParams | None) -> SimpleNamespace:
    p, model = defense.params, ctx.model
    if model is None or model.causal:
        raise ValueError("obfuslm classification needs an encoder model (e.g. minilm or "
                         "tiny-encoder) as the spec's model")
    x_train, y_train, x_val, y_val, x_test, y_test, held_out, n_labels = _split(ctx, p)
    server = copy.deepcopy(model.server)
    table = model.embedding_table.float()
    tables, metrics = None, {}
    if obfuscation is not None:
        tables, metrics = obfuscate_model(ctx, server, table, None, obfuscation)
    key = tables.key if tables is not None else VocabKey.identity(model.vocab_size)
    client = ObfusClient(model, key, p.max_length)
    return SimpleNamespace(
        server=server, table=table, tables=tables, metrics=metrics, key=key,
        client=client, held_out=held_out, n_labels=n_labels,
        train=client.tokenize(x_train, y_train), validation=client.tokenize(x_val, y_val),
        test=client.tokenize(x_test, y_test))


def classification_releases(defense, ctx, obfuscation: ObfuscationParams | None) -> list:
    """Tables ((k, ε) per token), the id streams and the labels (∞ with reasons), and masks;
    the validation texts are sent like the training ones (ids, mask, labels)."""
    st = _prepared(defense, ctx, obfuscation)
    n_ids = int(st.train.mask.sum() + st.validation.mask.sum() + st.test.mask.sum())
    return [*releases(st.tables, obfuscation, n_ids, len(st.train) + len(st.validation)),
            dpkit.Release("mask", None, "attention masks: text lengths, sent with the ids",
                          covered_by="token_ids")]


def run_classification(defense, ctx, obfuscation: ObfuscationParams | None) -> dpkit.DefenseResult:
    """Obfuscate (or not), send through ``ctx.wire``, fine-tune on the server, evaluate, view."""
    declare_releases(defense, ctx)
    p, model, wire = defense.params, ctx.model, ctx.wire
    st = _prepared(defense, ctx, obfuscation)
    metrics = dict(st.metrics)
    if obfuscation is not None:
        send_model(wire, st.server, obfuscation)
    splits = (("train", st.train), ("validation", st.validation), ("test", st.test))
    for name, split in splits:
        wire.send("token_ids", split.ids, rows=split.mask, observe=f"{name}_ids",
                  observe_rows=torch.ones(len(split.ids), dtype=torch.bool))
        wire.send("mask", split.mask, observe=f"{name}_mask")
    for split in (st.train, st.validation):
        wire.send("labels", split.labels)
    classifier = EncoderClassifier(st.server, model.hidden_size, st.n_labels,
                                   p.precision).to(ctx.device)
    started = time.perf_counter()
    gen = ctx.generator("obfuslm.train")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.numpy_seed("obfuslm.head"))
        classifier.head.reset_parameters()
    with torch.random.fork_rng(devices=[]):  # the body's dropout draws from the global RNG
        torch.manual_seed(ctx.numpy_seed("obfuslm.dropout"))
        curve = fine_tune(classifier, st.train, epochs=p.epochs, batch_size=p.batch_size,
                          lr=p.lr, head_lr=p.head_lr, generator=gen, say=ctx.say,
                          validation=st.validation, patience=p.patience, stop_on=p.stop_on,
                          group_by_length=p.group_by_length, validate_every=p.validate_every)
    metrics.update(train_loss=curve.final_train, train_s=time.perf_counter() - started,
                   train_examples=float(len(st.train)),
                   validation_examples=float(len(st.validation)))
    metrics.update(_epochs(curve, p, len(st.train)))
    predictions = predict(classifier, st.test)
    wire.reply("predictions", predictions)
    metrics["accuracy"] = float((predictions == st.test.labels.cpu()).float().mean())
    wire.derive("token_ids", lambda *parts: _documents(*parts)[: p.attack_docs],
                *(f"{name}_{part}" for name, _ in splits for part in ("ids", "mask")))
    weight = st.server.get_input_embeddings().weight.detach()
    wire.derive("obfuscated_table", lambda *_: weight, "token_ids",
                server_state={"fine-tuned server model": weight})
    truth = [st.key.decode(ids) for ids in wire.observed["token_ids"]]
    public = public_documents(ctx, p.public_dataset, p.public_params, st.held_out, p.public_max)
    public_ids = st.client.original_ids(public).documents() if public else []
    view = build_view(wire, truth, st.table, public_ids, model.special_token_ids(),
                      obfuscation_knowledge(obfuscation) if obfuscation else {}, st.key.forward)
    result = dpkit.DefenseResult(metrics=metrics, view=view, wire_bytes=wire.summary())
    attach_curves(result, [curve])
    return result


def _epochs(curve, p: TrainParams, n_train: int) -> dict[str, float]:
    """Epochs trained and, with patience, the epoch of the kept model (fractional when the
    server validates every ``validate_every`` texts)."""
    per_round = (p.validate_every or n_train) / n_train
    out = {"epochs_trained": min(len(curve.steps) * per_round, float(p.epochs))}
    if curve.best_step is not None:
        out["best_epoch"] = curve.best_step * per_round
    return out


def _documents(*parts: torch.Tensor) -> list[torch.Tensor]:
    """Each document's ids without padding, from (ids, mask) pairs in sending order."""
    docs = []
    for ids, mask in zip(parts[::2], parts[1::2]):
        docs.extend(row[m.bool()] for row, m in zip(ids, mask))
    return docs


class ObfusLM(dpkit.Component):
    """ObfusLM (classification): permuted vocabulary, EmbedCluster + WeightSynth tables, server
    fine-tuning on obfuscated ids; ``plus`` adds the hidden-dimension obfuscation."""

    name: ClassVar[str] = "obfuslm"
    Params: ClassVar[type[ObfusLMParams]] = ObfusLMParams

    def releases(self, ctx) -> list[dpkit.Release]:
        """The obfuscated tables ((k, ε)), the id stream and the labels (∞ with reasons)."""
        return classification_releases(self, ctx, self.params)

    def run(self, ctx) -> dpkit.DefenseResult:
        """Obfuscate, fine-tune, evaluate; the (k, ε)-anonymity spend is declared first."""
        return run_classification(self, ctx, self.params)


class ObfusLMPlaintext(dpkit.Component):
    """Plaintext baseline for ObfusLM: the same fine-tuning on real ids (no protection)."""

    name: ClassVar[str] = "obfuslm_plaintext"
    Params: ClassVar[type[TrainParams]] = TrainParams

    def releases(self, ctx) -> list[dpkit.Release]:
        """The real id stream and the labels, each ε = ∞ with its reason."""
        return classification_releases(self, ctx, None)

    def run(self, ctx) -> dpkit.DefenseResult:
        """Fine-tune and evaluate on plaintext; the ledger records ε = ∞ with the reason."""
        return run_classification(self, ctx, None)
