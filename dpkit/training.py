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
    """

    component: str
    unit: str = "epoch"
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    solver_converged: bool | None = None

    def add(self, step: int, train: float, val: float = math.nan) -> None:
        """Append the losses measured at ``step``."""
        self.steps.append(int(step))
        self.train_loss.append(float(train))
        self.val_loss.append(float(val))

    @property
    def final_train(self) -> float:
        """Last training loss (``nan`` for an empty curve)."""
        return _last_finite(self.train_loss)

    @property
    def final_val(self) -> float:
        """Last validation loss (``nan`` when none was measured)."""
        return _last_finite(self.val_loss)

    def to_dict(self) -> dict:
        """JSON-safe form: non-finite losses as the strings ``"nan"`` / ``"inf"``."""
        def safe(xs: list[float]) -> list:
            return [x if math.isfinite(x) else str(x) for x in xs]

        out: dict[str, object] = {"component": self.component, "unit": self.unit, "steps": list(self.steps),
               "train_loss": safe(self.train_loss), "val_loss": safe(self.val_loss)}
        if self.solver_converged is not None:
            out["solver_converged"] = self.solver_converged
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TrainingCurve:
        """Inverse of :meth:`to_dict`."""
        return cls(data["component"], data.get("unit", "epoch"), [int(s) for s in data["steps"]],
                   [float(x) for x in data["train_loss"]], [float(x) for x in data["val_loss"]],
                   data.get("solver_converged"))


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
    points never counts as converged. A curve carrying ``solver_converged`` is decided by it.
    """
    if not 0 < window < 1 or tol < 0:
        raise ValueError(f"converged needs 0 < window < 1 and tol ≥ 0, got window={window}, "
                         f"tol={tol}")
    if curve.solver_converged is not None:
        return curve.solver_converged
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
    metrics = {"converged": float(stuck == 0), "curves_not_converged": float(stuck),
               "train_loss_final": curves[0].final_train}
    if math.isfinite(curves[0].final_val):
        metrics["val_loss_final"] = curves[0].final_val
    return metrics


def attach_curves(result, curves: Iterable[TrainingCurve], **rule) -> None:
    """Add :func:`convergence_metrics` to ``result.metrics`` and the curves as
    ``result.training_curves`` (JSON-safe dicts); ``rule`` passes ``window`` / ``tol``."""
    curves = list(curves)
    result.metrics.update(convergence_metrics(curves, **rule))
    setattr(result, CURVES_FIELD, [c.to_dict() for c in curves])
