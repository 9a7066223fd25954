"""Training curves of trained components and the rule that says whether training converged.

Every trained component of a defense (a teacher, a student, a DP-SGD model, a denoiser, ...)
records a :class:`TrainingCurve`: its training loss and, where a validation split exists, its
validation loss, per epoch or per evaluation step. :func:`converged` applies one rule to it, and
:func:`attach_curves` puts the verdict and the curves into a defense's result:

- ``metrics["converged"]``: 1.0 when every curve converged, else 0.0;
- ``metrics["train_loss_final"]`` / ``metrics["val_loss_final"]``: last losses of the main curve
  (the first one given: the model the cell evaluates); ``val_loss_final`` only where that curve
  measured a validation loss, so every metric stays finite;
- ``metrics["curves_not_converged"]``: how many curves were still improving;
- ``result.training_curves``: every curve as a JSON-safe dict (:meth:`TrainingCurve.to_dict`).

A training loop may stop on a validation quantity with :class:`EarlyStopping` (Keras'
``EarlyStopping(restore_best_weights=True)``, Hugging Face's ``load_best_model_at_end`` with
``metric_for_best_model``): the validation loss, or a validation metric such as AUC recorded in
the curve's ``val_metric``. The loop ends once that quantity has not improved for ``patience``
evaluations and puts back the best evaluation's parameters. Its curves then carry
``best_step`` and ``stopped_early``; a curve that stopped early counts as converged (the held-out
quantity stopped improving; training on would overfit), and the reported final losses are those
of the kept step. A loop that reaches its last epoch without stopping is judged by the
ordinary rule.

The curves are diagnostics for whoever runs the experiment; a training loss measured on private
batches is not part of any differentially private release.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CURVES_FIELD = "training_curves"
DEFAULT_WINDOW = 0.2
DEFAULT_TOLERANCE = 0.01


@dataclass
class TrainingCurve:
    """Losses of one component: ``steps[i]`` (epoch or step number) with its train and val loss.

    A loss that was not measured at a point is ``nan``; ``unit`` says what a step counts.
    ``solver_converged`` is set by components fitted with a solver that has its own stopping
    rule (L-BFGS's gradient tolerance): :func:`converged` then takes the solver's word.
    ``val_metric`` holds a validation metric named ``val_metric_name`` (e.g. AUC; its name says
    which way is better) where the loop measured one; ``best_step`` / ``stopped_early`` are set by
    :meth:`EarlyStopping.mark`.
    """

    component: str
    unit: str = "epoch"
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    solver_converged: bool | None = None
    best_step: int | None = None
    stopped_early: bool | None = None
    val_metric_name: str | None = None
    val_metric: list[float] = field(default_factory=list)

    def add(self, step: int, train: float, val: float = math.nan,
            metric: float | None = None) -> None:
        """Append the losses (and the validation metric, if the curve has one) at ``step``."""
        self.steps.append(int(step))
        self.train_loss.append(float(train))
        self.val_loss.append(float(val))
        if metric is not None:
            self.val_metric.append(float(metric))

    @property
    def final_train(self) -> float:
        """Training loss of the kept model: at ``best_step`` when set, else the last one."""
        return _last_finite(self._kept(self.train_loss))

    @property
    def final_val(self) -> float:
        """Validation loss of the kept model (``nan`` when none was measured)."""
        return _last_finite(self._kept(self.val_loss))

    def _kept(self, losses: list[float]) -> list[float]:
        if self.best_step is None or self.best_step not in self.steps:
            return losses
        return losses[:self.steps.index(self.best_step) + 1]

    def to_dict(self) -> dict:
        """JSON-safe form: non-finite losses as the strings ``"nan"`` / ``"inf"``."""
        def safe(xs: list[float]) -> list:
            return [x if math.isfinite(x) else str(x) for x in xs]

        out: dict[str, object] = {"component": self.component, "unit": self.unit, "steps": list(self.steps),
               "train_loss": safe(self.train_loss), "val_loss": safe(self.val_loss)}
        for name in ("solver_converged", "best_step", "stopped_early", "val_metric_name"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.val_metric:
            out["val_metric"] = safe(self.val_metric)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TrainingCurve:
        """Inverse of :meth:`to_dict`."""
        return cls(data["component"], data.get("unit", "epoch"), [int(s) for s in data["steps"]],
                   [float(x) for x in data["train_loss"]], [float(x) for x in data["val_loss"]],
                   data.get("solver_converged"), data.get("best_step"), data.get("stopped_early"),
                   data.get("val_metric_name"), [float(x) for x in data.get("val_metric", [])])


def _last_finite(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return finite[-1] if finite else math.nan


def still_improving(losses: Sequence[float], *, window: float = DEFAULT_WINDOW,
                    tol: float = DEFAULT_TOLERANCE) -> bool:
    """Whether the best loss of the last ``window`` share of points beats the best loss before it
    by more than ``tol`` of that earlier best *and* by more than ``tol`` of the curve's whole descent
    (first point to its best), so a loss creeping towards zero (1e-4 to 1e-6 after starting at 0.7)
    counts as settled. Needs at least two finite points; fewer count as improving."""
    finite = [v for v in losses if math.isfinite(v)]
    if len(finite) < 2:
        return True
    tail = min(len(finite) - 1, max(1, math.ceil(window * len(finite))))
    before, after = min(finite[:-tail]), min(finite[-tail:])
    gain = before - after
    descent = finite[0] - min(finite)
    return gain > tol * max(abs(before), 1e-12) and gain > tol * descent


def converged(curve: TrainingCurve, *, window: float = DEFAULT_WINDOW,
              tol: float = DEFAULT_TOLERANCE) -> bool:
    """True when neither the training nor the validation loss was still improving at the end.

    A loss is still improving when the best value over the last ``window`` share of the curve
    is lower than the best value before it by more than ``tol`` relative to that earlier best and
    to the curve's total descent (see :func:`still_improving`).
    Validation loss is checked only where it was measured; a curve with fewer than two training
    points never counts as converged. A curve carrying ``solver_converged`` is decided by it;
    one whose loop stopped early on its validation quantity (``stopped_early``) counts as
    converged.
    """
    if not 0 < window < 1 or tol < 0:
        raise ValueError(f"converged needs 0 < window < 1 and tol ≥ 0, got window={window}, "
                         f"tol={tol}")
    if curve.solver_converged is not None:
        return curve.solver_converged
    if curve.stopped_early:
        return True
    if still_improving(curve.train_loss, window=window, tol=tol):
        return False
    has_val = sum(math.isfinite(v) for v in curve.val_loss) >= 2
    return not (has_val and still_improving(curve.val_loss, window=window, tol=tol))


def convergence_metrics(curves: Iterable[TrainingCurve], *, window: float = DEFAULT_WINDOW,
                        tol: float = DEFAULT_TOLERANCE) -> dict[str, float]:
    """``converged`` (1.0 / 0.0 over all curves), final losses of the first curve (validation only
    where measured), and the count of curves still improving."""
    curves = list(curves)
    if not curves:
        raise ValueError("convergence_metrics needs at least one training curve")
    stuck = sum(not converged(c, window=window, tol=tol) for c in curves)
    main = curves[0]
    metrics = {"converged": float(stuck == 0), "curves_not_converged": float(stuck),
               "train_loss_final": main.final_train}
    if math.isfinite(main.final_val):
        metrics["val_loss_final"] = main.final_val
    if main.stopped_early is not None and main.steps:
        metrics.update(stopped_early=float(main.stopped_early), steps_trained=float(main.steps[-1]),
                       best_step=float(main.best_step if main.best_step is not None else -1))
    return metrics


def attach_curves(result, curves: Iterable[TrainingCurve], **rule) -> None:
    """Add :func:`convergence_metrics` to ``result.metrics`` and the curves as
    ``result.training_curves`` (JSON-safe dicts); ``rule`` passes ``window`` / ``tol``."""
    curves = list(curves)
    result.metrics.update(convergence_metrics(curves, **rule))
    setattr(result, CURVES_FIELD, [c.to_dict() for c in curves])


class EarlyStopping:
    """Stop a loop once its validation quantity has not improved for ``patience`` evaluations
    and keep the parameters of the best evaluation.

    ``mode="min"`` for a loss, ``"max"`` for a metric such as AUC or accuracy. Call
    :meth:`update` after each validation with the modules being trained; it snapshots their
    trainable parameters and buffers whenever the value improves by more than ``min_delta`` and
    returns True when the loop should stop (a tie is no improvement). After the loop,
    :meth:`restore` puts the best snapshot back and :meth:`mark` records the outcome on the
    loop's curves.
    """

    def __init__(self, patience: int, min_delta: float = 0.0, mode: str = "min") -> None:
        if patience < 1 or not min_delta >= 0 or mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping needs patience ≥ 1, min_delta ≥ 0 and mode 'min' or "
                             f"'max', got patience={patience}, min_delta={min_delta}, "
                             f"mode={mode!r}")
        self.patience, self.min_delta, self.sign = patience, min_delta, 1 if mode == "min" else -1
        self._best, self.waited = math.inf, 0  # best of sign × value: lower is better
        self.best_step: int | None = None
        self._snapshot: list[dict] = []

    @property
    def triggered(self) -> bool:
        """Whether the validation quantity went ``patience`` evaluations without improving."""
        return self.waited >= self.patience

    def update(self, step: int, value: float, *modules) -> bool:
        """Record the validation value at ``step``; True when training should stop now."""
        if not math.isfinite(value):
            raise ValueError(f"early stopping needs a finite validation value, got {value} at "
                             f"step {step}; hold out validation data the quantity can be measured on, "
                             "or set patience to None")
        if self.sign * value < self._best - self.min_delta:
            self._best, self.best_step, self.waited = self.sign * value, int(step), 0
            self._snapshot = [_trained_state(m) for m in modules]
        else:
            self.waited += 1
        return self.triggered

    def restore(self, *modules) -> None:
        """Load the best evaluation's parameters into ``modules`` (as passed to :meth:`update`)."""
        if len(modules) != len(self._snapshot):
            raise ValueError(f"restore got {len(modules)} modules but {len(self._snapshot)} "
                             "were snapshotted; pass the same modules as to update")
        for module, state in zip(modules, self._snapshot):
            tensors = dict(module.named_parameters())
            tensors.update(dict(module.named_buffers()))
            for name, value in state.items():
                tensors[name].data.copy_(value)

    def mark(self, *curves: TrainingCurve) -> None:
        """Record the kept step and whether the loop stopped early on each of ``curves``."""
        for curve in curves:
            curve.best_step, curve.stopped_early = self.best_step, self.triggered


def _trained_state(module) -> dict:
    """Copies of ``module``'s trainable parameters and its buffers, by name."""
    state = {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}
    state.update({name: b.detach().clone() for name, b in module.named_buffers()})
    return state
