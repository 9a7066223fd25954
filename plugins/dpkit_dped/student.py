"""The DPED student: a skip-gram network trained on the noisy teacher releases (Eq. 3–4).

The student is a pure function of what crossed the wire (the answered query ids, their released
outputs and hidden means), the public start and public numbers (the planned noise): nothing here
reads private text, so it can run on the untrusted side of the wire.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from dpkit import TrainingCurve, Validation, fit_epochs
from dpkit_dped.heldout import fit_vectors, fold_in_losses
from dpkit_dped.selection import gain_test, row_output_losses
from dpkit_dped.skipgram import WordModel


FINISHES = ("fold_in", "rerun", "none")
FINISH_STEPS = 50  # L-BFGS iterations of the final fold-in of every answered word


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
    """Batch mean of Eq. 4 (``squared``: ‖softmax(y_S) − ŷ‖²) or of ``cross_entropy`` against
    ``targets``: labels ``[B]`` (ŷ their one-hot vector) or soft target rows ``[B, V]`` (for
    cross-entropy these must be distributions, see ``targets.nonnegative``)."""
    if kind == "cross_entropy" and not targets.is_floating_point():
        return nn.functional.cross_entropy(logits, targets)
    return row_output_losses(logits, targets, kind).mean()


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


class Eq3:
    """Eq. 3 over the released answers — output terms where ``out_mask``, hidden terms where
    ``hid_mask`` — and the student runs that minimise it."""

    def __init__(self, ids, hidden, targets, *, out_mask, hid_mask, loss_kind: str,
                 output_weight: float, hidden_weight: float, vocab_size: int, dim: int,
                 init: WordModel | None, generator: torch.Generator):
        self.ids, self.hidden, self.targets = ids, hidden, targets
        self.out_mask, self.hid_mask = out_mask, hid_mask
        self.kind, self.w_out, self.w_hid = loss_kind, output_weight, hidden_weight
        self.vocab_size, self.dim, self.init, self.generator = vocab_size, dim, init, generator

    def new_student(self, fit: torch.Tensor) -> SkipGramStudent:
        """The start: ``init`` (or random), with every word whose output terms are not among the
        ``fit`` rows set to the mean of its hidden targets (its exact minimiser)."""
        student = SkipGramStudent(self.vocab_size, self.dim, self.generator, self.init)
        only_hidden = self.hid_mask.clone()
        only_hidden[fit] = False
        if self.hidden is not None and bool(only_hidden.any()):
            closed_form_rows(student, self.ids[only_hidden], self.hidden[only_hidden])
        return student

    def loss(self, student: SkipGramStudent, rows: torch.Tensor) -> torch.Tensor:
        """Eq. 3's mean over ``rows``."""
        h, logits = student(self.ids[rows])
        loss = self.w_out * output_loss(logits, self.targets[rows], self.kind)
        if self.hidden is not None and self.w_hid > 0:
            squared = ((h - self.hidden[rows]) ** 2).sum(dim=-1)
            loss = loss + self.w_hid * (squared * self.hid_mask[rows]).mean()
        return loss

    def epoch_runner(self, student: SkipGramStudent, fit: torch.Tensor, lr: float, batch: int):
        """``train_epoch(epoch)`` for :func:`dpkit.ml.loop.fit_epochs`: one Adam pass over ``fit``."""
        opt, n, g = torch.optim.Adam(student.parameters(), lr=lr), len(fit), self.generator

        def train_epoch(epoch: int) -> float:
            order = fit[torch.randperm(n, generator=g, device=g.device).to(fit.device)]
            total = 0.0
            for s in range(0, n, batch):
                loss = self.loss(student, order[s:s + batch])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * min(batch, n - s)
            return total / n

        return train_epoch


def train_student(ids: torch.Tensor, hidden: torch.Tensor | None, targets: torch.Tensor, *,
                  vocab_size: int, dim: int, epochs: int, lr: float, batch_size: int,
                  hidden_weight: float, loss_kind: str, generator: torch.Generator,
                  output_weight: float = 1.0, output_rows: torch.Tensor | None = None,
                  hidden_rows: torch.Tensor | None = None, init: WordModel | None = None,
                  patience: int | None = None, holdout_share: float = 0.1,
                  held_targets: torch.Tensor | None = None,
                  fold_targets: torch.Tensor | None = None,
                  keep_start_level: float | None = 0.05, finish: str = "fold_in") -> WordModel:
    """Minimize Eq. 3 — ‖h_S(x) − H̃(x)‖² + L_out(y_S(x), ŷ(x)) — over the answered queries.

    ``targets`` are hard labels ``[n]`` or soft target rows ``[n, V]``; ``loss_kind`` is Eq. 4's
    ``squared`` distance or ``cross_entropy``; ``output_weight`` / ``hidden_weight`` weigh the two
    terms; ``hidden`` is ``None`` for the labels-only (PATE) student. ``output_rows`` /
    ``hidden_rows`` (boolean ``[n]``, default all) mark the terms whose target carries information;
    the others are left out. Words never answered keep ``init``'s vectors (or random ones). A word
    with hidden terms only is set to its exact minimiser (the mean of its hidden targets).

    Without ``patience`` the output terms are fitted by Adam for ``epochs`` epochs. With it, the
    number of epochs is chosen on answers: ``holdout_share`` of the output terms is held out, the
    loop stops once their loss has not improved for ``patience`` epochs, and the best epoch counts
    only if its held-out gain over the start (epoch 0) is significant at ``keep_start_level``
    (:mod:`dpkit_dped.selection`; None: always), the held-out loss measured against
    ``held_targets`` (default ``targets``; pass the unbiased noisy estimate where ``targets`` were
    made nonnegative). With ``fold_targets`` (one per answer) each held-out word's input vector
    is first fitted to its own terms against them, the output layer frozen, and the answer scored
    after that (fold-in, :mod:`dpkit_dped.heldout`; pass the two halves of a data fission as
    ``fold_targets`` and ``held_targets``); without, it is scored at its start vector. A kept
    epoch is then finished, since a held-out word's vector never trains in the selection run:
    ``fold_in`` fits every answered word's input vector to its own terms with the kept output
    layer frozen (the model the fold-in score chose), ``rerun`` trains again from the start on
    every answer for the kept number of epochs, ``none`` keeps the selection run. Without a
    significant gain the start is kept. Fewer than two output terms leave nothing to stop on: with
    ``patience`` they are not trained. The choice is on ``model.selection``.
    """
    if patience is not None and not 0 < holdout_share < 1:
        raise ValueError(f"holdout_share must lie in (0, 1) to stop early, got {holdout_share}")
    if finish not in FINISHES:
        raise ValueError(f"finish must be one of {FINISHES}, got {finish!r}")
    if keep_start_level is not None and not 0 < keep_start_level < 1:
        raise ValueError(f"keep_start_level must lie in (0, 1) or be None, got {keep_start_level}")
    held_goal = targets if held_targets is None else held_targets
    if len(held_goal) != len(targets) or (fold_targets is not None
                                          and len(fold_targets) != len(targets)):
        raise ValueError(f"held_targets / fold_targets must have one row per answered query "
                         f"({len(targets)}), got {len(held_goal)} / "
                         f"{'–' if fold_targets is None else len(fold_targets)}")
    every = torch.ones(len(ids), dtype=torch.bool, device=ids.device)
    out_mask = (every if output_rows is None else output_rows.to(ids.device)) & (output_weight > 0)
    hid_mask = ((every if hidden_rows is None else hidden_rows.to(ids.device))
                & (hidden is not None) & (hidden_weight > 0))
    eq3 = Eq3(ids, hidden, targets, out_mask=out_mask, hid_mask=hid_mask, loss_kind=loss_kind,
              output_weight=output_weight, hidden_weight=hidden_weight, vocab_size=vocab_size,
              dim=dim, init=init, generator=generator)
    trained = out_mask.nonzero().squeeze(1)
    if patience is None:
        return _plain_run(eq3, trained, epochs, lr, batch_size)
    if len(trained) < 2:  # nothing to hold out: no gradient training, all closed form
        return _plain_run(eq3, trained[:0], 0, lr, batch_size)
    fit, held = split_holdout(trained, holdout_share, generator)
    student = eq3.new_student(fit)
    curve = TrainingCurve("student")

    held_start = student.embed[ids[held]].detach().clone()

    def held_rows() -> torch.Tensor:
        if fold_targets is not None:
            return fold_in_losses(
                student.out, student.bias, held_start, fold_targets[held], held_goal[held],
                loss_kind=loss_kind, output_weight=output_weight,
                hidden=None if hidden is None else hidden[held], hidden_mask=hid_mask[held],
                hidden_weight=hidden_weight)
        with torch.no_grad():
            logits = student(ids[held])[1]
            return output_weight * row_output_losses(logits, held_goal[held], loss_kind)

    at_start: dict[str, torch.Tensor] = {}
    start_state: dict[str, torch.Tensor] = {}

    def start() -> Validation:
        at_start["rows"] = held_rows()
        start_state.update({k: v.detach().clone() for k, v in student.state_dict().items()})
        with torch.no_grad():
            return Validation(float(at_start["rows"].mean()), train=float(eq3.loss(student, fit)))

    fit_epochs(curve, epochs, eq3.epoch_runner(student, fit, lr, batch_size),
               lambda: Validation(float(held_rows().mean())), modules=(student,),
               patience=patience, start=start)
    test = None
    if keep_start_level is not None and curve.best_step:
        test = gain_test(at_start["rows"], held_rows(), best_step=curve.best_step,
                         compared=len(curve.steps) - 1, level=keep_start_level)
    keep = bool(curve.best_step) and (test is None or test.significant)
    if not keep:
        student.load_state_dict(start_state)
        curve.best_step = 0
    elif finish == "fold_in":
        words, inverse = torch.unique(ids[trained], return_inverse=True)
        vectors = fit_vectors(
            student.out, student.bias, student.embed[words], inverse, targets[trained],
            loss_kind=loss_kind, output_weight=output_weight,
            hidden=None if hidden is None else hidden[trained], hidden_mask=hid_mask[trained],
            hidden_weight=hidden_weight, steps=FINISH_STEPS)
        with torch.no_grad():
            student.embed[words] = vectors
        test = replace(test, finish=f"fold-in of all {len(words)} answered words") if test else None
    elif finish == "rerun":
        student = eq3.new_student(trained)
        refit_curve = TrainingCurve("student (rerun on every answer)")
        epochs_kept = curve.best_step or 0
        fit_epochs(refit_curve, epochs_kept, eq3.epoch_runner(student, trained, lr, batch_size))
        test = replace(test, finish=f"rerun on all {len(trained)} answers") if test else None
    model = student.to_word_model()
    model.curve, model.selection = curve, test
    return model


def _plain_run(eq3: Eq3, rows: torch.Tensor, epochs: int, lr: float, batch: int) -> WordModel:
    """Adam for ``epochs`` epochs over ``rows`` (no held-out answers); all closed form when empty."""
    student = eq3.new_student(rows)
    curve = TrainingCurve("student")
    if len(rows) == 0:
        curve.add(0, 0.0)
        curve.solver_converged = True
    else:
        fit_epochs(curve, epochs, eq3.epoch_runner(student, rows, lr, batch))
    model = student.to_word_model()
    model.curve = curve
    return model
