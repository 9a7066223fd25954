"""The DPED student: a skip-gram network trained on the noisy teacher releases (Eq. 3–4)."""

from __future__ import annotations

import math

import torch
from torch import nn

from dpkit import TrainingCurve, Validation, fit_epochs
from dpkit_dped.evaluation import perplexity
from dpkit_dped.selection import gain_test, row_output_losses
from dpkit_dped.skipgram import WordModel


class SkipGramStudent(nn.Module):
    """Embedding ``h_S`` (``[V, d]``) and output layer ``y_S`` (``[V, d]`` + bias) over the vocabulary."""

    def __init__(self, vocab_size: int, dim: int, generator: torch.Generator,
                 init: WordModel | None = None):
        super().__init__()
        dev = generator.device
        start = init.vectors.clone() if init is not None else (
            torch.randn(vocab_size, dim, generator=generator, device=dev) / dim ** 0.5)
        self.embed = nn.Parameter(start)
        self.out = nn.Parameter(init.out_vectors.clone() if init is not None else
                                torch.randn(vocab_size, dim, generator=generator, device=dev) * 0.01)
        self.bias = nn.Parameter(torch.zeros(vocab_size, device=dev))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden vectors ``[B, d]`` and context logits ``[B, V]`` of word ids ``[B]``."""
        h = self.embed[ids]
        return h, h @ self.out.T + self.bias

    def to_word_model(self) -> WordModel:
        """The trained tensors as a :class:`WordModel`."""
        return WordModel(self.embed.detach().clone(), self.out.detach().clone(),
                         self.bias.detach().clone())


def output_loss(logits: torch.Tensor, targets: torch.Tensor, kind: str) -> torch.Tensor:
    """Eq. 4 (``squared``: ‖softmax(y_S) − ŷ‖², batch mean) or cross-entropy against ``targets``.

    ``targets`` is either labels ``[B]`` (hard: ŷ is their one-hot vector) or soft target rows
    ``[B, V]``; for cross-entropy soft rows must be distributions (see ``targets.nonnegative``).
    """
    soft = targets.is_floating_point()
    if kind == "cross_entropy":
        return nn.functional.cross_entropy(logits, targets)
    if kind == "squared":
        probs = logits.softmax(dim=-1)
        goal = targets if soft else nn.functional.one_hot(targets, probs.shape[-1]).to(probs.dtype)
        return ((probs - goal) ** 2).sum(dim=-1).mean()
    raise ValueError(f"output loss must be 'squared' or 'cross_entropy', got {kind!r}")


def closed_form_rows(student: SkipGramStudent, ids: torch.Tensor, hidden: torch.Tensor) -> None:
    """Set the embedding of each word in ``ids`` to the mean of its hidden targets: the exact
    minimiser of Eq. 3 for a word that has only hidden terms (nothing else touches its row)."""
    with torch.no_grad():
        sums = torch.zeros_like(student.embed).index_add_(0, ids, hidden.to(student.embed.dtype))
        counts = torch.zeros(len(sums), device=sums.device).index_add_(
            0, ids, torch.ones(len(ids), device=sums.device))
        rows = counts.nonzero().squeeze(1)
        student.embed[rows] = sums[rows] / counts[rows].unsqueeze(1)


def split_holdout(rows: torch.Tensor, share: float, generator: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(fit, held): ``share`` of ``rows`` held out (at least one, never all)."""
    order = rows[torch.randperm(len(rows), generator=generator, device=generator.device).to(rows.device)]
    cut = min(max(1, round(share * len(rows))), len(rows) - 1)
    return order[cut:], order[:cut]


def train_student(ids: torch.Tensor, hidden: torch.Tensor | None, targets: torch.Tensor, *,
                  vocab_size: int, dim: int, epochs: int, lr: float, batch_size: int,
                  hidden_weight: float, loss_kind: str, generator: torch.Generator,
                  output_weight: float = 1.0, output_rows: torch.Tensor | None = None,
                  hidden_rows: torch.Tensor | None = None, init: WordModel | None = None,
                  validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                  patience: int | None = None, holdout_share: float = 0.1,
                  held_targets: torch.Tensor | None = None,
                  keep_start_level: float | None = 0.05) -> WordModel:
    """Minimize Eq. 3 — ‖h_S(x) − H̃(x)‖² + L_out(y_S(x), ŷ(x)) — over the answered queries.

    ``targets`` are hard labels ``[n]`` or soft target rows ``[n, V]`` (see :func:`output_loss`);
    ``output_weight`` and ``hidden_weight`` weigh the two terms. ``hidden`` is ``None`` for the
    labels-only (PATE) student. ``output_rows`` / ``hidden_rows`` (boolean ``[n]``, default all)
    mark the terms whose target carries information; the others are left out (a target shrunk all
    the way to the public model's prediction would only move the student by Adam's
    scale-free steps on rounding-level gradients). Words never answered keep their initial vectors:
    random, or ``init``'s (the public model: input and output layer).

    A word with hidden terms only has the exact minimiser h = its hidden target (the mean of its
    targets), which is set directly. The output terms are fitted by Adam. With ``patience`` set,
    ``holdout_share`` of them is held out and the loop stops once the held-out output loss has not
    improved for ``patience`` epochs, keeping the best epoch — the start (epoch 0) included, so a
    student that only gets worse keeps its start; a held-out word's hidden term still counts.
    The held-out loss is measured against ``held_targets`` (default ``targets``; pass the unbiased
    noisy estimate where ``targets`` were made nonnegative), and the best epoch replaces the start
    only if its held-out gain is significant at ``keep_start_level`` (None: always), see
    :mod:`dpkit_dped.selection`; the test is on ``model.selection``.
    Held-out answers are noisy releases already on the ledger, so stopping on them is
    post-processing; ``validation`` (private documents set aside) is never used to choose anything:
    its log perplexity is the curve's diagnostic (``val_metric`` when stopping, else the
    validation loss). Fewer than two output terms leave nothing to stop on: with ``patience`` they
    are not trained, and the curve, all closed form, is marked solved.
    """
    if patience is not None and not 0 < holdout_share < 1:
        raise ValueError(f"holdout_share must lie in (0, 1) to stop early, got {holdout_share}")
    if keep_start_level is not None and not 0 < keep_start_level < 1:
        raise ValueError(f"keep_start_level must lie in (0, 1) or be None, got {keep_start_level}")
    held_goal = targets if held_targets is None else held_targets
    if len(held_goal) != len(targets):
        raise ValueError(f"held_targets has {len(held_goal)} rows, targets {len(targets)}; give "
                         "one held-out target per answered query")
    every = torch.ones(len(ids), dtype=torch.bool, device=ids.device)
    out_mask = (every if output_rows is None else output_rows.to(ids.device)) & (output_weight > 0)
    hid_mask = (every if hidden_rows is None else hidden_rows.to(ids.device)) & (hidden is not None)
    student = SkipGramStudent(vocab_size, dim, generator, init)
    curve = TrainingCurve("student")
    trained = out_mask.nonzero().squeeze(1)
    fit, held = trained, None
    if patience is not None and len(trained) >= 2:
        fit, held = split_holdout(trained, holdout_share, generator)
        curve.val_metric_name = "private_validation_log_perplexity (diagnostic)"
    elif patience is not None:
        fit = trained[:0]
    only_hidden = hid_mask.clone()
    only_hidden[fit] = False
    if hidden is not None and bool(only_hidden.any()):
        closed_form_rows(student, ids[only_hidden], hidden[only_hidden])

    def eq3(rows: torch.Tensor) -> torch.Tensor:
        h, logits = student(ids[rows])
        loss = output_weight * output_loss(logits, targets[rows], loss_kind)
        if hidden is not None:
            squared = ((h - hidden[rows]) ** 2).sum(dim=-1)
            loss = loss + hidden_weight * (squared * hid_mask[rows]).mean()
        return loss

    def held_rows() -> torch.Tensor:
        with torch.no_grad():
            return output_weight * row_output_losses(student(ids[held])[1], held_goal[held], loss_kind)

    def held_output() -> float:
        return float(held_rows().mean())

    def diagnostic() -> float:
        if validation is None:
            return math.nan
        with torch.no_grad():
            return math.log(perplexity(student.to_word_model(), *validation))

    stopping = held is not None and patience is not None

    at_start: dict[str, torch.Tensor] = {}
    start_state: dict[str, torch.Tensor] = {}

    def start() -> Validation:
        with torch.no_grad():
            at_start["rows"] = held_rows()
            start_state.update(_state(student))
            return Validation(float(at_start["rows"].mean()), diagnostic(), train=float(eq3(fit)))

    if len(fit) == 0:  # nothing left to fit by gradient: all closed form
        curve.add(0, 0.0, diagnostic())
        curve.solver_converged = True
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    n = len(fit)

    def train_epoch(epoch: int) -> float:
        order = fit[torch.randperm(n, generator=generator, device=generator.device).to(fit.device)]
        total = 0.0
        for s in range(0, n, batch_size):
            loss = eq3(order[s:s + batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * min(batch_size, n - s)
        return total / n

    def validate() -> Validation:
        if stopping:
            return Validation(held_output(), diagnostic())
        return Validation(diagnostic())

    fit_epochs(curve, epochs if n else 0, train_epoch, validate, modules=(student,),
               patience=patience if stopping else None, start=start if stopping else None)
    test = None
    if stopping and keep_start_level is not None and curve.best_step:
        test = gain_test(at_start["rows"], held_rows(), best_step=curve.best_step,
                         compared=len(curve.steps) - 1, level=keep_start_level)
        if not test.significant:
            student.load_state_dict(start_state)
            curve.best_step = 0
    model = student.to_word_model()
    model.curve, model.selection = curve, test
    return model


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in module.state_dict().items()}
