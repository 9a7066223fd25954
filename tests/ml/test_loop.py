"""The shared epoch loop: stops with patience, keeps the best epoch's parameters, keeps a start."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.ml.loop import Validation, fit_epochs
from dpkit.ml.training import TrainingCurve, converged


def _scripted(values):
    """A model whose weight is set to the epoch number, and a validation that reads a script."""
    model = torch.nn.Linear(1, 1, bias=False)
    seen = iter(values)

    def train_epoch(epoch):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        return 1.0 / epoch

    return model, train_epoch, lambda: Validation(loss=next(seen))


def test_stops_after_patience_and_restores_the_best_epoch():
    model, train_epoch, validate = _scripted([5.0, 3.0, 4.0, 4.5, 2.0])
    curve = fit_epochs(TrainingCurve("toy"), 10, train_epoch, validate, modules=(model,), patience=2)
    assert curve.steps == [1, 2, 3, 4]           # epoch 2 best, then two epochs without gain
    assert curve.best_step == 2 and curve.stopped_early
    assert float(model.weight) == 2.0            # epoch 2's parameters are back
    assert converged(curve)


def test_runs_every_epoch_without_patience():
    model, train_epoch, validate = _scripted([5.0, 4.0, 3.0])
    curve = fit_epochs(TrainingCurve("toy"), 3, train_epoch, validate, modules=(model,))
    assert curve.steps == [1, 2, 3] and curve.best_step is None and float(model.weight) == 3.0


def test_a_start_that_only_gets_worse_is_kept():
    model, train_epoch, validate = _scripted([2.0, 3.0, 4.0])
    with torch.no_grad():
        model.weight.fill_(-1.0)
    curve = fit_epochs(TrainingCurve("toy"), 5, train_epoch, validate, modules=(model,),
                       patience=2, start=lambda: Validation(loss=1.0, train=0.5))
    assert curve.steps == [0, 1, 2] and curve.best_step == 0
    assert float(model.weight) == -1.0 and curve.train_loss[0] == 0.5


def test_watching_a_metric_keeps_its_maximum():
    model = torch.nn.Linear(1, 1, bias=False)
    auc = iter([0.6, 0.8, 0.7, 0.75])

    def train_epoch(epoch):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        return 0.0

    curve = fit_epochs(TrainingCurve("toy"), 9, train_epoch,
                       lambda: Validation(loss=math.nan, metric=next(auc)), modules=(model,),
                       patience=2, watch="metric")
    assert curve.best_step == 2 and curve.val_metric == [0.6, 0.8, 0.7, 0.75]
    assert float(model.weight) == 2.0


def test_mistakes_are_named():
    with pytest.raises(ValueError, match="needs a validate"):
        fit_epochs(TrainingCurve("toy"), 3, lambda e: 0.0, patience=2)
    with pytest.raises(ValueError, match="watch must be"):
        fit_epochs(TrainingCurve("toy"), 3, lambda e: 0.0, watch="auc")
    with pytest.raises(ValueError, match="returned none"):
        fit_epochs(TrainingCurve("toy"), 3, lambda e: 0.0, lambda: Validation(loss=1.0),
                   patience=1, watch="metric")


def test_rounds_given_as_an_iterable_are_passed_through_and_numbered():
    got = []

    def train_round(batches):
        got.append(batches)
        return float(len(batches))

    curve = fit_epochs(TrainingCurve("toy"), (b for b in (["a"], ["b", "c"], ["d"])), train_round,
                       lambda: Validation(loss=1.0))
    assert got == [["a"], ["b", "c"], ["d"]]
    assert curve.steps == [1, 2, 3] and curve.train_loss == [1.0, 2.0, 1.0]
