"""privatize_text's run: the documents it reads (split, max_docs, cap) are the ones it declares,
privatizes from the run's noise secret and sends, once, as ``wire_message`` lays them out; the
attacks' ground truth is what crossed; CusText's output sets come from the train split's counts."""

from __future__ import annotations

import pytest
import torch
from dpkit_tasks.privatize import encode_docs, wire_message

from dpkit.contract.plugins import get_registry
from dpkit.data.types import TextDataset, TextSplit
from dpkit.testing.params_contract import tiny_context
from dpkit.testing.strategies_tokens import random_space

SPACE = random_space(64, 8, 0, stop_words=True)
SECRET = "the client's secret"
TRAIN = ["w5 w5 w9 the w12 w12", "w7 w7 w7 zzz", "the w30", "w40 w41 w42 w43 w44", "w60"]
TEST = ["w5 zzz w9 the w12 w13", "zzz qqq", "the w30 w41 w41 w8 w9", "w60 w61", "w62"]
LABELS = [0, 1, 0, 1, 1]
TASK = {"oov": "keep", "max_docs": 4, "max_tokens_per_doc": 4, "split": "other",
        "utility": "classifier"}


def dataset(**splits) -> TextDataset:
    return TextDataset("toy", {name: TextSplit(texts, labels) for name, (texts, labels)
                               in splits.items()})


def defense(mechanism, params, **task):
    return get_registry().build("defense", "privatize_text", {
        "mechanism": mechanism, "mechanism_params": params, **task})


def context(data, secret=SECRET):
    ctx = tiny_context(SPACE, data)
    ctx.noise_secret = secret
    return ctx


def privatized(data, secret, mechanism, params, docs, truth):
    """(substituted, noisy) of ``_privatize`` on ``docs`` under ``secret``, outside a run."""
    reference = defense(mechanism, params, **TASK)
    mech = reference._prepared(context(data)).mechanism
    return reference._privatize(context(data, secret), mech, SPACE, docs, truth)


def sent_by(ctx) -> list[tuple[str, torch.Tensor]]:
    """Every (name, tensor) ``ctx.wire.send`` is handed from now on."""
    sent, send = [], ctx.wire.send

    def spy(name, tensor=None, *args, **kwargs):
        sent.append((name, tensor))
        return send(name, tensor, *args, **kwargs)

    ctx.wire.send = spy
    return sent


@pytest.mark.parametrize("mechanism, params", [("laplace_dx", {"eta": 3.0}),
                                               ("text2text", {"eta": 3.0}),
                                               ("dx_stencil", {"eta": 3.0, "window": 2})])
def test_the_run_sends_once_the_declared_documents_privatized_from_its_secret(mechanism, params):
    data = dataset(other=(TEST, LABELS), train=(TRAIN, LABELS))
    ctx = context(data)
    sent = sent_by(ctx)
    result = defense(mechanism, params, **TASK).run(ctx)
    docs = encode_docs(SPACE, TEST[:4], "keep", 4)  # the split, max_docs and the cap
    truth = torch.cat(docs)
    known = truth >= 0
    substituted, noisy = privatized(data, SECRET, mechanism, params, docs, truth)
    name, message, per_doc = wire_message(docs, substituted, noisy)
    assert [n for n, _ in sent] == [name] and torch.equal(sent[0][1], message)
    assert ctx.wire.units[name] == ctx.wire.releases[name].count == ctx.ledger.spends[0].count
    assert torch.equal(result.truth["token_ids"], truth[known])
    assert result.truth["doc_lengths"] == per_doc == [3, 0, 4, 2]
    assert result.truth["attributes"] == LABELS[:4]  # the labels of the documents read
    assert 0.0 <= result.metrics["accuracy"] <= 1.0 and "clean_accuracy" in result.metrics
    assert result.metrics["n_docs"] == 4.0 and result.metrics["n_tokens"] == float(known.sum())
    assert result.metrics["token_preservation"] == pytest.approx(
        float((substituted[known] == truth[known]).float().mean()))
    again = privatized(data, "another secret", mechanism, params, docs, truth)
    assert not torch.equal(*((again[1], noisy) if noisy is not None else (again[0], substituted)))



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("mechanism, params", [("laplace_dx", {"eta": 3.0}),
                                               ("santext", {"epsilon": 2.0})])
def test_a_cuda_cell_privatizes_its_cpu_models_space_and_documents_on_its_device(mechanism, params):
    """The model's space and the documents are read on the CPU; a CUDA cell moves both to its
    device, where its generator draws: the run sends what it declared and its ground truth is
    the documents' in-vocabulary ids."""
    data = dataset(other=(TEST, LABELS))
    ctx = context(data)
    ctx.device = torch.device("cuda")
    sent, task = sent_by(ctx), dict(TASK, utility="none")
    private = defense(mechanism, params, **task)
    space = private._prepared(ctx).space
    assert space.vectors.device.type == "cuda" and torch.equal(space.vectors.cpu(), SPACE.vectors)
    result = private.run(ctx)
    truth = torch.cat(encode_docs(SPACE, TEST[:4], "keep", 4))
    known = truth >= 0
    assert torch.equal(result.truth["token_ids"].cpu(), truth[known])
    assert result.truth["doc_lengths"] == [3, 0, 4, 2]
    assert [n for n, _ in sent] == [("embeddings" if mechanism == "laplace_dx" else "substituted_ids")]
    assert result.metrics["n_tokens"] == float(known.sum())

def test_an_unlabelled_split_gives_the_attacks_no_attributes():
    result = defense("laplace_dx", {"eta": 3.0}).run(context(dataset(test=(TEST, None))))
    assert result.truth["attributes"] is None and result.truth["doc_lengths"] == [5, 0, 6, 2, 1]


@pytest.mark.parametrize("name", ["custext", "santext_plus"])
def test_the_frequency_mechanisms_are_fitted_on_the_train_splits_in_vocabulary_counts(name):
    data = dataset(train=(TRAIN, LABELS), test=(TEST, LABELS))
    task = {"classifier_train_docs": 3, "max_tokens_per_doc": 4}
    fitted = defense(name, {"epsilon": 2.0}, **task)._prepared(context(data)).mechanism
    flat = torch.cat(encode_docs(SPACE, TRAIN[:3], "drop", 4))
    assert torch.equal(fitted.counts, torch.bincount(flat, minlength=SPACE.size))
    assert int(fitted.counts[0]) == 2  # "the" (id 0) is counted like any word
    empty = dataset(train=([], []), test=(TEST, LABELS))
    fitted = defense(name, {"epsilon": 2.0}, **task)._prepared(context(empty)).mechanism
    assert torch.equal(fitted.counts, torch.zeros(SPACE.size, dtype=torch.long))
    unlabelled = dataset(train=(TRAIN, None), test=(TEST, LABELS))  # counts need no labels
    fitted = defense(name, {"epsilon": 2.0}, **task)._prepared(context(unlabelled)).mechanism
    assert torch.equal(fitted.counts, torch.bincount(flat, minlength=SPACE.size))
    unfitted = defense(name, {"epsilon": 2.0})._prepared(context(dataset(test=(TEST, LABELS))))
    assert unfitted.train is None


def test_each_defense_of_a_cell_prepares_its_own_mechanism():
    ctx = context(dataset(test=(TEST, LABELS)))
    laplace, text2text = defense("laplace_dx", {"eta": 3.0}), defense("text2text", {"eta": 3.0})
    assert laplace._prepared(ctx).mechanism.name == "laplace_dx"
    assert text2text._prepared(ctx).mechanism.name == "text2text"
    assert laplace._prepared(ctx) is laplace._prepared(ctx)  # built once per cell


def test_a_mechanism_of_another_domain_is_refused_by_name():
    with pytest.raises(ValueError, match="privatize_text runs token or embedding mechanisms; "
                                         "'obfuslm_table' has domain 'table'"):
        defense("obfuslm_table", {}).run(context(dataset(test=(TEST, LABELS))))
