"""Training curves of ObfusLM's trained parts: the server's fine-tuning (validated on held-out
train texts sent like the training ones, never test) and the learned-inversion network."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_obfuslm.attacks import LearnedInversion
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.inversion import CURVE_POINTS, train_inverter
from dpkit_obfuslm.obfuscate import VocabKey

from dpkit.data.types import TextDataset, TextSplit
from dpkit.ml.training import TrainingCurve
from dpkit.models import tiny_causal
from dpkit.testing.boundary import attack_metrics, server_of
from tests.plugins.obfuslm.conftest import run_defense

CONVERGENCE = {"converged", "curves_not_converged", "train_loss_final", "val_loss_final"}
OBFUS = {"k": 5, "beta": 0.9, "epsilon": 0.5, "epochs": 3, "batch_size": 32}


@pytest.mark.parametrize("name", ["obfuslm", "obfuslm_plaintext"])
def test_fine_tuning_records_a_validated_curve(encoder, corpus, name):
    params = OBFUS if name == "obfuslm" else {"epochs": 3, "batch_size": 32}
    result, ctx = run_defense(name, params, encoder, corpus)
    (raw,) = result.training_curves
    curve = TrainingCurve.from_dict(raw)
    assert curve.component == "server fine-tuning" and curve.steps == [1, 2, 3]
    assert all(math.isfinite(v) for v in curve.train_loss + curve.val_loss)
    assert CONVERGENCE <= set(result.metrics)
    assert result.metrics["train_loss"] == result.metrics["train_loss_final"] == curve.final_train
    # 160 train texts, a tenth of them validate (the test texts' labels never cross)
    assert (result.metrics["train_examples"], result.metrics["validation_examples"]) == (144, 16)
    labels = [s for s in ctx.ledger.spends if s.label.startswith("labels")]
    assert ctx.wire.units["labels"] == 160 and [s.count for s in labels] == [160]
    assert set(server_of(ctx).labels) == {"train", "validation"}


def test_validation_comes_after_the_capped_training_texts(encoder, corpus):
    result, ctx = run_defense("obfuslm_plaintext", {"epochs": 2, "max_train": 50}, encoder, corpus)
    assert (result.metrics["train_examples"], result.metrics["validation_examples"]) == (50, 5)
    client = ObfusClient(encoder, VocabKey.identity(encoder.vocab_size), 64)
    expected = client.tokenize(corpus["train"].texts[50:55])  # the texts right after training's
    received = server_of(ctx).received("validation")
    assert torch.equal(received.mask, expected.mask)
    assert all(torch.equal(a, b) for a, b in zip(received.documents(), expected.documents()))


def test_fine_tuning_validation_never_reads_test_data(encoder, corpus):
    """Flipped test labels leave the curve unchanged (this also needs dropout seeded per cell:
    both runs share one encoder, so the global RNG has moved on between them)."""
    test = corpus["test"]
    flipped = TextDataset(corpus.name, {"train": corpus["train"],
                                        "test": TextSplit(test.texts, [1 - y for y in test.labels])},
                          label_names=corpus.label_names)
    one, _ = run_defense("obfuslm", OBFUS, encoder, corpus)
    two, _ = run_defense("obfuslm", OBFUS, encoder, flipped)
    assert one.training_curves == two.training_curves
    assert one.metrics["accuracy"] == pytest.approx(1 - two.metrics["accuracy"])


def test_too_few_texts_for_validation_is_explained(encoder, corpus_factory):
    with pytest.raises(ValueError, match="validation_share"):
        run_defense("obfuslm_plaintext", {"validation_share": 0.4},
             encoder, corpus_factory(3))


@pytest.mark.parametrize(("steps", "points"), [(7, 7), (60, CURVE_POINTS)])
def test_inverter_curve_points_and_held_out_draw(encoder, steps, points):
    table = encoder.embedding_table.float()
    obf = {"k": 5, "beta": 0.9, "epsilon": 0.5}
    params = LearnedInversion.Params(steps=steps, draws=1, hidden=32, batch_size=16)
    _, curve = train_inverter(table, obf, params, torch.Generator().manual_seed(0))
    assert len(curve.steps) == points and curve.steps[-1] == steps and curve.unit == "step"
    assert all(math.isfinite(v) for v in curve.train_loss + curve.val_loss)
    if steps > 40:  # learns something that carries over to an obfuscation it never saw
        assert curve.val_loss[-1] < curve.val_loss[0]


def test_learned_inversion_reports_its_convergence(encoder, corpus):
    result, ctx = run_defense("obfuslm", OBFUS, encoder, corpus)
    scores = attack_metrics(ctx, result, "learned_inversion", {"steps": 10, "draws": 1,
                                                               "hidden": 32})
    assert {f"inv_{k}" for k in CONVERGENCE} <= set(scores)
    assert "converged" not in scores  # the defense's own flag is not overwritten


def test_lora_fine_tuning_records_a_validated_curve(corpus_factory):
    data = corpus_factory(60, seed=1)
    params = {"k": 5, "beta": 0.9, "steps": 4, "max_train": 20, "prompt_tokens": 5,
              "new_tokens": 4, "n_eval": 2}
    result, ctx = run_defense("obfuslm_generate", params, tiny_causal(hidden_size=32), data)
    (curve,) = (TrainingCurve.from_dict(c) for c in result.training_curves)
    assert curve.component == "LoRA fine-tuning" and curve.steps == [1, 2, 3, 4]
    assert all(math.isfinite(v) for v in curve.train_loss + curve.val_loss)
    assert CONVERGENCE <= set(result.metrics)
    assert (result.metrics["train_examples"], result.metrics["validation_examples"]) == (20, 2)
    (ids,) = [s for s in ctx.ledger.spends if s.label.startswith("token_ids")]
    assert ids.count == ctx.wire.units["token_ids"]  # validation ids declared like the rest


def test_patience_stops_fine_tuning_on_validation(encoder, corpus, monkeypatch):
    from dpkit_obfuslm import classify

    losses = iter([0.9, 0.4, 0.6, 0.7, 0.1])  # best at epoch 2, then two worse: stop at 4
    monkeypatch.setattr(classify, "validation_scores", lambda model, data: (next(losses), 0.5))
    result, _ = run_defense("obfuslm_plaintext", {"epochs": 5, "batch_size": 32, "patience": 2},
                     encoder, corpus)
    (raw,) = result.training_curves
    assert raw["steps"] == [1, 2, 3, 4] and raw["best_step"] == 2 and raw["stopped_early"]
    m = result.metrics
    assert m["converged"] == 1.0 and m["best_step"] == 2 and m["val_loss_final"] == 0.4
    assert m["train_loss"] == raw["train_loss"][1]  # the kept epoch's training loss


def test_bf16_autocast_trains_to_a_similar_model(encoder, corpus):
    fp32, _ = run_defense("obfuslm_plaintext", {"epochs": 2, "batch_size": 32}, encoder, corpus)
    bf16, _ = run_defense("obfuslm_plaintext", {"epochs": 2, "batch_size": 32, "precision": "bf16"},
                   encoder, corpus)
    a, b = fp32.training_curves[0]["train_loss"], bf16.training_curves[0]["train_loss"]
    assert a != b  # the body really ran in bfloat16
    assert b == pytest.approx(a, rel=0.05)
    assert abs(fp32.metrics["accuracy"] - bf16.metrics["accuracy"]) <= 0.15


def test_patience_on_validation_accuracy(encoder, corpus, monkeypatch):
    from dpkit_obfuslm import classify

    scores = iter([(0.5, 0.6), (0.6, 0.7), (0.7, 0.7), (0.8, 0.8)])  # a tie is no improvement
    monkeypatch.setattr(classify, "validation_scores", lambda model, data: next(scores))
    result, _ = run_defense("obfuslm_plaintext", {"epochs": 4, "batch_size": 32, "patience": 1,
                                           "stop_on": "accuracy"}, encoder, corpus)
    (raw,) = result.training_curves
    assert raw["steps"] == [1, 2, 3] and raw["best_step"] == 2
    assert raw["val_metric_name"] == "accuracy" and raw["val_metric"] == [0.6, 0.7, 0.7]


def test_length_grouped_batches_cover_every_text_once_with_less_padding():
    from dpkit_obfuslm.classify import Encoded, epoch_batches

    lengths = torch.randint(3, 48, (1000,), generator=torch.Generator().manual_seed(0))
    mask = (torch.arange(48).unsqueeze(0) < lengths.unsqueeze(1)).long()
    data = Encoded(torch.zeros_like(mask), mask)
    plain = epoch_batches(data, 32, torch.Generator().manual_seed(1))
    grouped = epoch_batches(data, 32, torch.Generator().manual_seed(1), group_by_length=True)
    for batches in (plain, grouped):
        assert sorted(torch.cat(batches).tolist()) == list(range(1000))
        assert max(len(b) for b in batches) == 32
    def padded(batches):
        return sum(len(b) * int(lengths[b].max()) for b in batches)
    assert padded(grouped) < 0.8 * padded(plain)
    again = epoch_batches(data, 32, torch.Generator().manual_seed(2), group_by_length=True)
    assert [b.tolist() for b in again] != [b.tolist() for b in grouped]  # still random


def test_validation_size_sets_the_number_of_validation_texts(encoder, corpus):
    result, ctx = run_defense("obfuslm_plaintext", {"epochs": 1, "max_train": 50, "validation_size": 20,
                                             "group_by_length": True}, encoder, corpus)
    assert (result.metrics["train_examples"], result.metrics["validation_examples"]) == (50, 20)
    assert ctx.wire.units["labels"] == 70


def test_validation_rounds_span_epochs_and_keep_every_batch():
    from dpkit_obfuslm.classify import Encoded, validation_rounds

    data = Encoded(torch.zeros(100, 4, dtype=torch.long), torch.ones(100, 4, dtype=torch.long))
    by_epoch = list(validation_rounds(data, 3, 10, torch.Generator().manual_seed(0)))
    by_texts = list(validation_rounds(data, 3, 10, torch.Generator().manual_seed(0), every=40))
    assert [sum(len(b) for b in r) for r in by_epoch] == [100, 100, 100]
    assert [sum(len(b) for b in r) for r in by_texts] == [40, 40, 40, 40, 40, 40, 40, 20]
    flat = lambda rounds: [b.tolist() for r in rounds for b in r]  # noqa: E731
    assert flat(by_texts) == flat(by_epoch)  # the same batches, validated at other points


def test_validating_every_epoch_of_texts_is_the_epoch_rule(encoder, corpus):
    base = {"epochs": 3, "batch_size": 32, "patience": 3, "stop_on": "accuracy"}
    epochs, _ = run_defense("obfuslm", {**OBFUS, **base}, encoder, corpus)
    texts, _ = run_defense("obfuslm", {**OBFUS, **base, "validate_every": 144}, encoder, corpus)
    a, b = epochs.training_curves[0], texts.training_curves[0]
    assert (a["train_loss"], a["val_loss"]) == (b["train_loss"], b["val_loss"])
    assert a["unit"] == "epoch" and b["unit"] == "round of 144 texts"
    quarter, _ = run_defense("obfuslm", {**OBFUS, **base, "validate_every": 36}, encoder, corpus)
    steps = quarter.training_curves[0]["steps"]
    assert len(steps) > 3 and quarter.metrics["epochs_trained"] <= 3
    assert quarter.metrics["best_epoch"] == pytest.approx(
        quarter.training_curves[0]["best_step"] * 36 / 144)
