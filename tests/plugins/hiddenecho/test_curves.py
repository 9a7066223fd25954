"""HiddenEcho's training curves: per-epoch task and critic losses, a validation slice of train."""

import math

import pytest
import torch

from dpkit.models import tiny_encoder
from dpkit.contract.plugins import get_registry
from dpkit_hiddenecho.data import PrivateSplit, hold_out, validation_size

from dpkit.testing.boundary import server_of

from .test_defense import HE, SMALL, run, toy_dataset

TWO_EPOCHS = {**HE, "epochs": 2}


@pytest.fixture(scope="module")
def setup():
    return get_registry(), toy_dataset(), tiny_encoder(32, 3, 2, 0)


def test_every_trained_part_records_one_point_per_epoch(setup):
    result, ctx = run(setup, "hiddenecho", TWO_EPOCHS)
    curves = result.training_curves
    names = [c["component"] for c in curves]
    assert len(curves) == 3 and "split model" in names[0]
    assert "server MINE" in names[1] and "client MINE" in names[2]
    assert all(c["steps"] == [1, 2] for c in curves)
    task = curves[0]
    assert all(math.isfinite(v) for v in task["train_loss"] + task["val_loss"])
    m = result.metrics
    assert m["train_loss_final"] == task["train_loss"][-1]
    assert m["val_loss_final"] == task["val_loss"][-1]
    assert m["converged"] in (0.0, 1.0) and 0 <= m["curves_not_converged"] <= 3
    # 32 training texts: the last 3 (10 %) validate, 29 train; test texts never validate
    assert m["train_examples_used"] == 29 and m["val_examples"] == 3
    validation = ctx.wire.bytes("validation")
    assert validation > 0 and validation / ctx.wire.per_batch("validation") == 2


def test_ldp_has_only_the_split_model_curve(setup):
    result, _ = run(setup, "hiddenecho_ldp", {**SMALL, "epochs": 2})
    assert [len(c["steps"]) for c in result.training_curves] == [2]


def test_validation_changes_neither_training_nor_the_ledger(setup, monkeypatch):
    from dpkit_hiddenecho import defense

    torch.manual_seed(0)  # module initialisation and dropout draw from torch's global generator
    with_val, ctx_val = run(setup, "hiddenecho", TWO_EPOCHS)
    monkeypatch.setattr(defense.HiddenEchoLdp, "validate", lambda self, proto, val: (math.nan, math.nan))
    torch.manual_seed(0)
    without, ctx_none = run(setup, "hiddenecho", TWO_EPOCHS)
    assert with_val.training_curves[0]["train_loss"] == without.training_curves[0]["train_loss"]
    assert with_val.metrics["auc"] == without.metrics["auc"]
    assert [s.count for s in ctx_val.ledger.spends] == [s.count for s in ctx_none.ledger.spends]
    # the held-out tokens are declared with the training split; validation adds exactly their
    # rows, so none of them was sent in training or with the test split (disjoint slices)
    held_out = sum(int(t.numel()) for t in toy_tokens(setup)[-3:])
    assert ctx_val.wire.units["embeddings"] == ctx_none.wire.units["embeddings"] + held_out
    assert ctx_val.wire.units["embeddings"] <= ctx_val.ledger.spends[0].count


def toy_tokens(setup):
    from dpkit_hiddenecho.data import tokenize_unpadded

    _, dataset, model = setup
    return tokenize_unpadded(model, list(dataset["train"].texts), 64)


def test_no_validation_when_the_fraction_is_zero(setup):
    result, _ = run(setup, "hiddenecho_ldp", {**SMALL, "epochs": 2, "val_fraction": 0.0})
    assert "val_loss_final" not in result.metrics  # nothing measured, so no nan metric
    assert result.metrics["train_examples_used"] == 32


def test_hold_out_takes_the_last_training_examples():
    ids = [torch.tensor([i, i + 1]) for i in range(10)]
    split = PrivateSplit(ids, [t.float() for t in ids], torch.arange(10))
    fit, val = hold_out(split, validation_size(10, 0.2))
    assert len(fit) == 8 and len(val) == 2
    assert val.labels.tolist() == [8, 9] and fit.labels.tolist() == list(range(8))
    assert validation_size(10, 0.0) == 0 and validation_size(10, 0.01) == 1
    with pytest.raises(ValueError, match="val_fraction"):
        validation_size(2, 0.5)


def test_each_cell_runs_its_own_layer_filter_on_what_crossed(setup, monkeypatch):
    """No cross-cell memo: every cell's server scores the samples it received itself (two
    cells, two filter runs), on exactly the rows of the layer_filter phase."""
    from dpkit_hiddenecho import server as server_module

    calls = []
    original = server_module.layer_contributions

    def recorded(model, x, mask, *args, **kwargs):
        calls.append(x[mask].clone())
        return original(model, x, mask, *args, **kwargs)

    monkeypatch.setattr(server_module, "layer_contributions", recorded)
    first, ctx = run(setup, "hiddenecho", HE)
    again, _ = run(setup, "hiddenecho", HE)
    assert len(calls) == 2 and torch.equal(calls[0], calls[1])
    sent_rows = ctx.wire.bytes("layer_filter", "up", "embeddings") // (32 * 4)  # padded batch
    assert sent_rows % 4 == 0 and 4 * 3 <= len(calls[0]) <= sent_rows  # 4 samples, real rows
    assert first.metrics["lowest_layer_sent"] == again.metrics["lowest_layer_sent"]


def test_patience_stops_on_validation_and_keeps_the_best_epoch(setup, monkeypatch):
    from dpkit_hiddenecho import fine_tune

    losses = iter([0.9, 0.5, 0.7, 0.8, 0.1, 0.1])  # best at epoch 2, two worse epochs: stop at 4
    monkeypatch.setattr(fine_tune.SplitFineTuning, "validate",
                        lambda self, proto, val: (next(losses), 0.5))
    result, ctx = run(setup, "hiddenecho", {**HE, "epochs": 6, "patience": 2})
    curves = result.training_curves
    assert all(c["steps"] == [1, 2, 3, 4] and c["best_step"] == 2 and c["stopped_early"]
               for c in curves)
    m = result.metrics
    assert m["converged"] == 1.0 and m["stopped_early"] == 1.0 and m["best_step"] == 2
    assert m["val_loss_final"] == 0.5 and m["steps_trained"] == 4
    # the ledger declared gradients for all 6 epochs: an early stop only under-uses it
    assert ctx.ledger.spends[1].count == 6 * 2
    # the server put back its own parameters of the kept epoch (it kept one set per epoch)
    server = server_of(ctx)
    assert sorted(server.snapshots) == [1, 2, 3, 4]
    kept = server.snapshots[2]
    for module, state in zip(server.snapshot_modules(), kept):
        now = dict(module.named_parameters()) | dict(module.named_buffers())
        assert all(torch.equal(now[name], value) for name, value in state.items())
    assert result.wire_bytes["restore_up_schedule"] == 8  # the kept epoch, one int64


def test_patience_without_validation_is_refused():
    from dpkit.base.errors import ParamsError

    with pytest.raises(ParamsError, match="val_fraction"):
        get_registry().build("defense", "hiddenecho", {**HE, "patience": 2, "val_fraction": 0})


def test_patience_on_validation_auc_keeps_the_best_auc_epoch(setup, monkeypatch):
    from dpkit_hiddenecho import fine_tune

    # the loss rises from epoch 1 (over-confidence) while AUC improves up to epoch 3
    scores = iter([(0.6, 0.60), (0.7, 0.65), (0.8, 0.70), (0.9, 0.69), (1.0, 0.68), (1.1, 0.9)])
    monkeypatch.setattr(fine_tune.SplitFineTuning, "validate",
                        lambda self, proto, val: next(scores))
    result, _ = run(setup, "hiddenecho", {**HE, "epochs": 6, "patience": 2, "stop_on": "auc"})
    task = result.training_curves[0]
    assert task["steps"] == [1, 2, 3, 4, 5] and task["best_step"] == 3
    assert task["val_metric_name"] == "auc" and task["val_metric"] == [0.6, 0.65, 0.7, 0.69, 0.68]
    assert result.metrics["val_loss_final"] == 0.8  # the kept epoch's loss


def test_validation_auc_is_measured_on_the_held_out_examples(setup):
    result, _ = run(setup, "hiddenecho", TWO_EPOCHS)
    aucs = result.training_curves[0]["val_metric"]
    assert len(aucs) == 2 and all(0.0 <= a <= 1.0 for a in aucs)
