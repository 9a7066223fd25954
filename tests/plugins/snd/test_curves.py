"""Training curves of SnD's trained parts: the denoisers (cached with their curve) and the
downstream classifier, validated on held-out training / public data, never on test."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import save_file

from dpkit.data.types import TextDataset, TextSplit
from dpkit.ml.training import TrainingCurve
from dpkit_snd.evaluate import held_out_rows
from dpkit_snd.training import stored_curve

CONVERGENCE = {"converged", "curves_not_converged", "train_loss_final", "val_loss_final"}


def _run(registry, ctx, name, params):
    return registry.build("defense", name, params).run(ctx)


def _curves(result) -> list[TrainingCurve]:
    return [TrainingCurve.from_dict(c) for c in result.training_curves]


def _finite(values) -> bool:
    return all(math.isfinite(v) for v in values)


def test_snd_records_classifier_and_denoiser_curves(registry, make_ctx, small, tmp_path):
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser}
    res = _run(registry, make_ctx(cache=tmp_path / "a"), "snd", raw)
    classifier, trained = _curves(res)
    assert classifier.component == "downstream classifier"
    assert classifier.steps == list(range(1, params["classifier_epochs"] + 1))
    assert trained.component == "snd denoiser"
    assert trained.steps == list(range(1, denoiser["epochs"] + 1))
    for curve in (classifier, trained):
        assert _finite(curve.train_loss) and _finite(curve.val_loss)
    assert CONVERGENCE <= set(res.metrics)
    assert res.metrics["train_loss_final"] == classifier.final_train  # the classifier comes first
    assert res.metrics["val_loss_final"] == classifier.final_val
    assert res.metrics["classifier_val_texts"] == round(0.1 * params["train_examples"])
    assert res.metrics["classifier_train_texts"] + res.metrics["classifier_val_texts"] == \
        params["train_examples"]
    # 128 public texts: a fifth (25) held out, the other 103 trained on
    assert (res.metrics["denoiser_train_texts"], res.metrics["denoiser_val_texts"]) == (103, 25)


def test_a_cached_denoiser_reports_the_curve_it_was_trained_with(registry, make_ctx, small,
                                                                  tmp_path):
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser}
    for name in ("snd", "snd_server_denoise"):
        cache = tmp_path / name
        fresh = _run(registry, make_ctx(cache=cache), name, raw)
        cached = _run(registry, make_ctx(cache=cache), name, raw)
        assert (fresh.metrics["denoiser_cached"], cached.metrics["denoiser_cached"]) == (0.0, 1.0)
        assert cached.training_curves == fresh.training_curves, name
        assert cached.metrics["converged"] == fresh.metrics["converged"]
        assert len(cached.training_curves) == 2


def test_a_cached_denoiser_without_a_curve_is_refused_with_advice(tmp_path):
    path = tmp_path / "denoiser.safetensors"
    save_file({"w": torch.zeros(2)}, str(path), metadata={"fields": "{}"})
    with pytest.raises(ValueError, match="no training curve.*retrained"):
        stored_curve(path)


@pytest.mark.parametrize("name", ["tokembpriv", "snd_text2text", "snd_clean"])
def test_baselines_record_the_classifier_curve(registry, make_ctx, small, name):
    params, _ = small
    raw = params if name == "snd_clean" else {**params, "eta": 150.0}
    res = _run(registry, make_ctx(), name, raw)
    (curve,) = _curves(res)
    assert len(curve.steps) == params["classifier_epochs"] and _finite(curve.val_loss)
    assert CONVERGENCE <= set(res.metrics)


def test_classifier_validation_never_reads_test_data(registry, make_ctx, small):
    """Shuffling the test labels changes no point of the classifier's curve."""
    params, _ = small
    base = make_ctx().dataset
    test = base["test"]
    flipped = TextDataset(base.name, {"train": base["train"],
                                      "test": TextSplit(test.texts, [1 - y for y in test.labels])},
                          label_names=base.label_names)
    raw = {**params, "eta": 150.0}
    one = _run(registry, make_ctx(), "tokembpriv", raw)
    two = _run(registry, make_ctx(dataset=flipped), "tokembpriv", raw)
    assert one.training_curves == two.training_curves
    assert one.metrics["accuracy"] == pytest.approx(1 - two.metrics["accuracy"])


def test_held_out_rows_partition_the_training_rows():
    fit, val = held_out_rows(50, 0.1, seed=3)
    assert len(val) == 5 and len(fit) == 45
    assert sorted(torch.cat([fit, val]).tolist()) == list(range(50))
    assert torch.equal(held_out_rows(50, 0.1, seed=3)[1], val)
    with pytest.raises(ValueError, match="fewer than 2"):
        held_out_rows(2, 0.4, seed=0)


def test_classifier_patience_keeps_the_best_epoch():
    from dpkit_snd.evaluate import train_classifier

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(80, 6, generator=gen)
    y = (x[:, 0] + 0.5 * torch.randn(80, generator=gen) > 0).long()
    val = (torch.randn(20, 6, generator=gen), torch.randint(0, 2, (20,), generator=gen))
    model, mean, std, curve = train_classifier(x, y, 2, epochs=200, generator=gen,
                                               validation=val, patience=3)
    assert curve.stopped_early and len(curve.steps) < 200
    assert curve.steps[-1] - curve.best_step == 3  # three epochs without a better validation
    with torch.no_grad():
        kept = float(torch.nn.functional.cross_entropy(model((val[0] - mean) / std), val[1]))
    assert kept == pytest.approx(min(curve.val_loss))  # the best epoch's weights are back


def test_classifier_patience_needs_validation():
    from dpkit_snd.evaluate import train_classifier

    with pytest.raises(ValueError, match="patience"):
        train_classifier(torch.randn(8, 2), torch.zeros(8).long(), 2, epochs=2,
                         generator=torch.Generator(), patience=2)
