"""The DPED student: a skip-gram network trained on the noisy teacher releases (Eq. 3–4)."""

from __future__ import annotations

import math

import torch
from torch import nn

from dpkit.training import EarlyStopping, TrainingCurve
from dpkit_dped.evaluation import perplexity
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


def train_student(ids: torch.Tensor, hidden: torch.Tensor | None, targets: torch.Tensor, *,
                  vocab_size: int, dim: int, epochs: int, lr: float, batch_size: int,
                  hidden_weight: float, loss_kind: str, generator: torch.Generator,
                  output_weight: float = 1.0,
                  init: WordModel | None = None,
                  validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                  patience: int | None = None, holdout_share: float = 0.1) -> WordModel:
    """Minimize Eq. 3 — ‖h_S(x) − H̃(x)‖² + L_out(y_S(x), ŷ(x)) — over the answered queries.

    ``targets`` are hard labels ``[n]`` or soft target rows ``[n, V]`` (see :func:`output_loss`);
    ``output_weight`` and ``hidden_weight`` weigh the two terms. ``hidden`` is ``None`` for the
    labels-only (PATE) student. Queries never answered keep their
    initial vectors: random, or ``init``'s (the public model: input and output layer).

    With ``patience`` set, ``holdout_share`` of the answered queries is held out of training and
    the loop stops once their Eq. 3 loss has not improved for ``patience`` epochs, keeping the best
    epoch's parameters — the start (epoch 0) included, so a student that only gets worse keeps its
    initial vectors. Those held-out answers are noisy releases already on the ledger, so stopping
    on them is post-processing; ``validation`` (private documents set aside) is never used to
    choose anything. The model's curve holds, per epoch, the mean Eq. 3 training loss, the
    held-out answers' loss as its validation loss (when stopping) and the log perplexity of the
    ``validation`` (center, context) pairs as a diagnostic: as ``val_metric`` when stopping, else
    as the validation loss.
    """
    if patience is not None and not 0 < holdout_share < 1:
        raise ValueError(f"holdout_share must lie in (0, 1) to stop early, got {holdout_share}")
    student = SkipGramStudent(vocab_size, dim, generator, init)
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    curve = TrainingCurve("student")
    fit, held = torch.arange(len(ids), device=ids.device), None
    if patience is not None:
        order = torch.randperm(len(ids), generator=generator, device=generator.device).to(ids.device)
        cut = round(holdout_share * len(ids))
        fit, held = order[cut:], order[:cut]
        if len(held) == 0 or len(fit) == 0:
            raise ValueError(f"early stopping holds out {holdout_share:.0%} of {len(ids)} answered "
                             "queries, which leaves no queries to train or to validate on; raise "
                             "num_queries or set student_patience to None")
        curve.val_metric_name = "private_validation_log_perplexity (diagnostic)"

    def eq3(rows: torch.Tensor) -> torch.Tensor:
        h, logits = student(ids[rows])
        loss = output_weight * output_loss(logits, targets[rows], loss_kind)
        if hidden is not None:
            loss = loss + hidden_weight * ((h - hidden[rows]) ** 2).sum(dim=-1).mean()
        return loss

    def diagnostic() -> float:
        if validation is None:
            return math.nan
        with torch.no_grad():
            return math.log(perplexity(student.to_word_model(), *validation))

    stopper = EarlyStopping(patience) if patience is not None else None
    if stopper is not None and held is not None:
        with torch.no_grad():
            start = float(eq3(held))
            curve.add(0, float(eq3(fit)), start, diagnostic())
        stopper.update(0, start, student)
    n = len(fit)
    for epoch in range(epochs if n else 0):
        order = fit[torch.randperm(n, generator=generator, device=generator.device).to(fit.device)]
        total = 0.0
        for s in range(0, n, batch_size):
            loss = eq3(order[s:s + batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * min(batch_size, n - s)
        if stopper is None or held is None:
            curve.add(epoch + 1, total / n, diagnostic())
            continue
        with torch.no_grad():
            held_loss = float(eq3(held))
        curve.add(epoch + 1, total / n, held_loss, diagnostic())
        if stopper.update(epoch + 1, held_loss, student):
            break
    if stopper is not None:
        stopper.restore(student)
        stopper.mark(curve)
    model = student.to_word_model()
    model.curve = curve
    return model
