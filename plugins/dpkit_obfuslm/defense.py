"""Classification defenses: ObfusLM (obfuscated fine-tuning + inference) and its plaintext baseline."""

from __future__ import annotations

import copy
import time
from typing import ClassVar

import torch
from pydantic import Field

import dpkit
from dpkit_obfuslm.classify import EncoderClassifier, accuracy, fine_tune
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import (ObfuscationParams, build_view, obfuscate_model,
                                  obfuscation_knowledge, public_documents, record_plaintext)
from dpkit_obfuslm.obfuscate import VocabKey


class TrainParams(dpkit.Params):
    """Fine-tuning, data and attack-view options shared by ObfusLM and its plaintext baseline."""

    epochs: int = Field(2, ge=1, le=50)
    lr: float = Field(5e-5, gt=0, le=1, description="learning rate of the encoder body")
    head_lr: float = Field(1e-3, gt=0, le=1, description="learning rate of the linear head")
    batch_size: int = Field(32, ge=1, le=4096)
    max_length: int = Field(64, ge=4, le=512, description="tokens per text (truncated)")
    max_train: int | None = Field(None, ge=2, description="cap on fine-tuning texts")
    max_test: int | None = Field(None, ge=1, description="cap on inference texts")
    public_dataset: str | None = Field(None, description="attacker's public corpus (registered "
                                       "dataset); default: held-out part of the train split")
    public_params: dict = Field(default_factory=dict)
    public_max: int = Field(2000, ge=1, description="public texts the attacker tokenizes")
    public_share: float = Field(0.2, ge=0.0, lt=1.0, description="share of the train split held "
                                "out as the attacker's public corpus when public_dataset is unset")
    attack_docs: int = Field(400, ge=1, description="client documents placed in the server view")


class ObfusLMParams(ObfuscationParams, TrainParams):
    """ObfusLM classification: obfuscation parameters plus fine-tuning options."""


def _split(ctx, p: TrainParams):
    data = ctx.dataset
    train, test = data["train"], data["test"]
    if train.labels is None or test.labels is None:
        raise ValueError(f"obfuslm needs a labelled dataset; {data.name!r} has no labels — "
                         "use e.g. rotten_tomatoes")
    n_public = 0 if p.public_dataset else int(len(train) * p.public_share)
    available = len(train) - n_public
    n_train = available if p.max_train is None else min(p.max_train, available)
    n_test = len(test) if p.max_test is None else min(p.max_test, len(test))
    held_out = train.texts[len(train) - n_public:] if n_public else []
    return (train.texts[:n_train], train.labels[:n_train], test.texts[:n_test],
            test.labels[:n_test], held_out, len(data.label_names or set(train.labels)))


def run_classification(ctx, p: TrainParams, obfuscation: ObfuscationParams | None
                       ) -> dpkit.DefenseResult:
    """Obfuscate (or not), fine-tune on the server, evaluate, and assemble the server view."""
    model = ctx.model
    if model is None or model.causal:
        raise ValueError("obfuslm classification needs an encoder model (e.g. minilm or "
                         "tiny-encoder) as the spec's model")
    x_train, y_train, x_test, y_test, held_out, n_labels = _split(ctx, p)
    server = copy.deepcopy(model.server)
    table = model.embedding_table.float()
    if obfuscation is None:
        record_plaintext(ctx)
        key, metrics = VocabKey.identity(model.vocab_size), {}
    else:
        tables, metrics = obfuscate_model(ctx, server, table, None, obfuscation)
        key = tables.key
    client = ObfusClient(model, key, p.max_length)
    train_sent, test_sent = client.tokenize(x_train, y_train), client.tokenize(x_test, y_test)
    classifier = EncoderClassifier(server, model.hidden_size, n_labels).to(ctx.device)
    started = time.perf_counter()
    gen = ctx.generator("obfuslm.train")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.numpy_seed("obfuslm.head"))
        classifier.head.reset_parameters()
    metrics["train_loss"] = fine_tune(classifier, train_sent, epochs=p.epochs,
                                      batch_size=p.batch_size, lr=p.lr, head_lr=p.head_lr,
                                      generator=gen, say=ctx.say)
    metrics["train_s"] = time.perf_counter() - started
    metrics["accuracy"] = accuracy(classifier, test_sent)
    sent = (train_sent.documents() + test_sent.documents())[: p.attack_docs]
    truth = [key.decode(ids) for ids in sent]
    public = public_documents(ctx, p.public_dataset, p.public_params, held_out, p.public_max)
    public_ids = client.original_ids(public).documents() if public else []
    observed_table = server.get_input_embeddings().weight
    view = build_view(observed_table, sent, truth, table, public_ids, model.special_token_ids(),
                      obfuscation_knowledge(obfuscation) if obfuscation else {}, key.forward)
    vocab, dim = observed_table.shape
    n_ids = int(train_sent.mask.sum() + test_sent.mask.sum())
    wire = {"ids_up": 4 * n_ids, "labels_up": 8 * len(train_sent), "predictions_down": 8 * len(test_sent)}
    if obfuscation is not None:
        wire["tables_up"] = 4 * vocab * dim
    return dpkit.DefenseResult(metrics=metrics, view=view, wire_bytes=wire)


class ObfusLM:
    """ObfusLM (classification): permuted vocabulary, EmbedCluster + WeightSynth tables, server
    fine-tuning on obfuscated ids; ``plus`` adds the hidden-dimension obfuscation."""

    name: ClassVar[str] = "obfuslm"
    Params: ClassVar[type[ObfusLMParams]] = ObfusLMParams

    def __init__(self, params: ObfusLMParams):
        self.params = params

    def run(self, ctx) -> dpkit.DefenseResult:
        """Obfuscate, fine-tune, evaluate; records the (k, ε)-anonymity spend first."""
        return run_classification(ctx, self.params, self.params)


class ObfusLMPlaintext:
    """Plaintext baseline for ObfusLM: the same fine-tuning on real ids (no protection)."""

    name: ClassVar[str] = "obfuslm_plaintext"
    Params: ClassVar[type[TrainParams]] = TrainParams

    def __init__(self, params: TrainParams):
        self.params = params

    def run(self, ctx) -> dpkit.DefenseResult:
        """Fine-tune and evaluate on plaintext; the ledger records ε = ∞ with the reason."""
        return run_classification(ctx, self.params, None)
