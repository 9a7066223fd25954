"""The epoch loop every trained component shares: train, validate, stop with patience, keep the best.

A plug-in gives the loop two functions — ``train_epoch(epoch)`` (one pass over its data, returning
the mean training loss) and ``validate()`` (what the held-out data says now) — and gets back the
:class:`~dpkit.ml.training.TrainingCurve` with the convergence bookkeeping done once, here::

    curve = fit_epochs(TrainingCurve("denoiser"), epochs, train_epoch, validate,
                       modules=(model,), patience=2)

With ``patience`` the loop stops once the watched validation value has not improved for that
many epochs and puts back the parameters of the best one (:class:`EarlyStopping`); ``start``
evaluates the untrained model as epoch 0, so a model that only gets worse keeps its start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.ml.training import EarlyStopping, TrainingCurve


@dataclass(frozen=True)
class Validation:
    """One evaluation: the validation ``loss``, an optional validation ``metric``, and for an
    evaluation at the start, the ``train`` loss measured before any step."""

    loss: float = math.nan
    metric: float | None = None
    train: float = math.nan

    def watched(self, watch: str) -> float:
        """The value early stopping follows: ``loss`` or ``metric``."""
        if watch == "loss":
            return self.loss
        if self.metric is None:
            raise ValueError("early stopping watches the validation metric, but validate() "
                             "returned none; return Validation(metric=...) or watch='loss'")
        return self.metric


def fit_epochs(curve: TrainingCurve, epochs: int | Iterable[Any], train_epoch: Callable[[Any], float],
               validate: Callable[[], Validation] | None = None, *,
               modules: Sequence[Any] = (), patience: int | None = None, watch: str = "loss",
               min_delta: float = 0.0, start: Callable[[], Validation] | None = None,
               ) -> TrainingCurve:
    """Run up to ``epochs`` epochs (numbered from 1), recording each on ``curve``; see the module.

    ``epochs`` is a count (``train_epoch`` gets the epoch's number) or the rounds themselves, e.g.
    a generator of batch lists (``train_epoch`` gets each round; the curve numbers them from 1).

    ``watch`` is ``"loss"`` (lower is better) or ``"metric"`` (higher is better, e.g. AUC).
    With ``patience`` the best epoch's parameters of ``modules`` are restored at the end and the
    curve is marked (``best_step``, ``stopped_early``).
    """
    if watch not in ("loss", "metric"):
        raise ValueError(f"fit_epochs: watch must be 'loss' or 'metric', got {watch!r}")
    if patience is not None and validate is None:
        raise ValueError(f"fit_epochs: patience={patience} needs a validate() function (held-out "
                         "data to stop on); pass one or set patience=None")
    stopper = (EarlyStopping(patience, min_delta, "min" if watch == "loss" else "max")
               if patience is not None else None)
    if start is not None:
        first = start()
        curve.add(0, first.train, first.loss, first.metric)
        if stopper is not None:
            stopper.update(0, first.watched(watch), *modules)
    rounds = range(1, epochs + 1) if isinstance(epochs, int) else epochs
    for epoch, item in enumerate(rounds, start=1):
        train = train_epoch(item)
        seen = validate() if validate is not None else Validation()
        curve.add(epoch, train, seen.loss, seen.metric)
        if stopper is not None and stopper.update(epoch, seen.watched(watch), *modules):
            break
    if stopper is not None:
        stopper.restore(*modules)
        stopper.mark(curve)
    return curve
