"""Training curves and the convergence rule."""

from __future__ import annotations

import json
import math

import pytest

from dpkit.contract.protocols import DefenseResult
from dpkit.ml.training import (
    TrainingCurve,
    attach_curves,
    converged,
    convergence_metrics,
    still_improving,
)


def curve_of(train, val=None, name="model"):
    curve = TrainingCurve(name)
    for i, t in enumerate(train):
        curve.add(i + 1, t, math.nan if val is None else val[i])
    return curve


def test_a_curve_still_falling_at_the_end_is_not_converged():
    falling = [10 / (i + 1) for i in range(10)]
    assert still_improving(falling)
    assert not converged(curve_of(falling))


def test_a_plateau_within_tolerance_is_converged():
    plateau = [5.0, 3.0, 2.0, 1.5, 1.2, 1.1, 1.1, 1.1, 1.1, 1.0945]
    assert converged(curve_of(plateau))
    assert not converged(curve_of(plateau), tol=1e-3)  # the last window still gains 0.5 %


def test_validation_still_falling_flags_even_when_train_is_flat():
    flat = [1.0] * 10
    assert converged(curve_of(flat, val=flat))
    assert not converged(curve_of(flat, val=[3.0 - 0.2 * i for i in range(10)]))
    rising_val = [1.0 + 0.1 * i for i in range(10)]  # overfitting: stopped improving
    assert converged(curve_of(flat, val=rising_val))


def test_too_short_curves_never_count_as_converged_and_bad_rules_fail():
    assert not converged(curve_of([1.0]))
    with pytest.raises(ValueError, match="window"):
        converged(curve_of([1.0, 1.0]), window=1.5)


def test_attach_puts_flag_final_losses_and_json_safe_curves_on_the_result():
    result = DefenseResult({"perplexity": 10.0})
    good, bad = curve_of([2.0, 1.0, 1.0, 1.0, 1.0], [3.0] * 5, "student"), curve_of([3, 2, 1], name="teacher")
    attach_curves(result, [good, bad])
    assert result.metrics["converged"] == 0.0 and result.metrics["curves_not_converged"] == 1.0
    assert result.metrics["train_loss_final"] == 1.0 and result.metrics["val_loss_final"] == 3.0
    restored = [TrainingCurve.from_dict(d) for d in json.loads(json.dumps(result.training_curves))]
    assert restored[0] == good and restored[1].component == "teacher"
    assert math.isnan(restored[1].val_loss[0])
    assert convergence_metrics([good])["converged"] == 1.0
    assert "val_loss_final" not in convergence_metrics([bad])  # no validation measured: no nan


def test_a_loss_creeping_towards_zero_is_settled_but_a_small_scale_loss_still_falling_is_not():
    to_zero = [0.7, 0.2, 0.05, 0.01, 1e-3, 1e-4, 1e-4, 5e-5, 1e-5, 1e-6]
    assert converged(curve_of(to_zero))  # the last gains are < 1 % of the 0.7 descent
    small_scale = [1e-3 * (0.8 ** i) for i in range(10)]  # MSE on a 1e-3 scale, still falling
    assert not converged(curve_of(small_scale))


def test_a_solver_verdict_overrides_the_rule_and_survives_json():
    still_falling = curve_of([10 / (i + 1) for i in range(10)])
    still_falling.solver_converged = True  # e.g. L-BFGS stopped on its gradient tolerance
    assert converged(still_falling)
    flat = curve_of([1.0] * 10)
    flat.solver_converged = False  # stopped by its iteration cap
    assert not converged(flat)
    restored = TrainingCurve.from_dict(json.loads(json.dumps(flat.to_dict())))
    assert restored.solver_converged is False and restored.train_loss == flat.train_loss


def fit_with_stopping(val_losses, patience, min_delta=0.0):
    """A toy loop: one parameter set to the epoch number, stopped on the given validation losses."""
    import torch

    from dpkit.ml.training import EarlyStopping

    model = torch.nn.Linear(1, 1)
    frozen = torch.nn.Linear(1, 1).requires_grad_(False)
    stopper, curve = EarlyStopping(patience, min_delta), TrainingCurve("toy")
    for epoch, val in enumerate(val_losses, start=1):
        with torch.no_grad():
            model.weight.fill_(epoch)
        curve.add(epoch, 1.0 / epoch, val)
        if stopper.update(epoch, val, model, frozen):
            break
    stopper.restore(model, frozen)
    stopper.mark(curve)
    return model, curve


def test_early_stopping_keeps_the_best_epoch_and_counts_as_converged():
    model, curve = fit_with_stopping([0.9, 0.7, 0.8, 0.75, 0.6, 0.5], patience=2)
    assert curve.steps == [1, 2, 3, 4] and curve.best_step == 2 and curve.stopped_early
    assert model.weight.item() == 2.0  # the parameters of epoch 2 are back
    assert curve.final_val == 0.7 and curve.final_train == 0.5  # losses of the kept epoch
    assert converged(curve)  # training loss still falling: held-out loss decides
    metrics = convergence_metrics([curve])
    assert metrics["stopped_early"] == 1.0 and metrics["best_step"] == 2
    assert metrics["steps_trained"] == 4 and metrics["val_loss_final"] == 0.7
    assert TrainingCurve.from_dict(json.loads(json.dumps(curve.to_dict()))) == curve


def test_a_loop_that_never_stops_is_judged_by_the_ordinary_rule():
    falling = [1.0, 0.8, 0.6, 0.5, 0.4]
    model, curve = fit_with_stopping(falling, patience=2)
    assert curve.stopped_early is False and curve.best_step == 5 and model.weight.item() == 5
    assert not converged(curve)


def test_improvements_below_min_delta_do_not_reset_patience():
    _, curve = fit_with_stopping([1.0, 0.999, 0.998, 0.5], patience=2, min_delta=0.01)
    assert curve.steps == [1, 2, 3] and curve.best_step == 1 and curve.stopped_early


def test_early_stopping_refuses_a_missing_validation_loss_and_bad_settings():
    from dpkit.ml.training import EarlyStopping

    with pytest.raises(ValueError, match="finite validation value"):
        EarlyStopping(1).update(1, math.nan)
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(0)


def test_early_stopping_on_a_metric_keeps_its_highest_step():
    import torch

    from dpkit.ml.training import EarlyStopping

    model, stopper, curve = torch.nn.Linear(1, 1), EarlyStopping(2, mode="max"), TrainingCurve("m")
    curve.val_metric_name = "auc"
    for epoch, (loss, auc) in enumerate([(0.7, 0.6), (0.9, 0.7), (1.1, 0.7), (1.3, 0.65)], 1):
        with torch.no_grad():
            model.weight.fill_(epoch)
        curve.add(epoch, 0.5, loss, auc)
        if stopper.update(epoch, auc, model):
            break
    stopper.restore(model)
    stopper.mark(curve)
    # loss rose from epoch 1, AUC peaked at 2 (a tie at 3 is no improvement): epoch 2 is kept
    assert curve.best_step == 2 and curve.steps == [1, 2, 3, 4] and model.weight.item() == 2
    assert TrainingCurve.from_dict(json.loads(json.dumps(curve.to_dict()))) == curve
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(1, mode="up")
