"""The DPED student: a skip-gram network trained on the noisy teacher releases (Eq. 3–4)."""

from __future__ import annotations

import math

import torch
from torch import nn

from dpkit.training import TrainingCurve
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


def output_loss(logits: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    """Eq. 4 (``squared``: ‖softmax(y_S) − onehot(ŷ)‖², batch mean) or cross-entropy."""
    if kind == "cross_entropy":
        return nn.functional.cross_entropy(logits, labels)
    if kind == "squared":
        probs = logits.softmax(dim=-1)
        onehot = nn.functional.one_hot(labels, probs.shape[-1]).to(probs.dtype)
        return ((probs - onehot) ** 2).sum(dim=-1).mean()
    raise ValueError(f"output loss must be 'squared' or 'cross_entropy', got {kind!r}")


def train_student(ids: torch.Tensor, hidden: torch.Tensor | None, labels: torch.Tensor, *,
                  vocab_size: int, dim: int, epochs: int, lr: float, batch_size: int,
                  hidden_weight: float, loss_kind: str, generator: torch.Generator,
                  init: WordModel | None = None,
                  validation: tuple[torch.Tensor, torch.Tensor] | None = None) -> WordModel:
    """Minimize Eq. 3 — ‖h_S(x) − H̃(x)‖² + L_out(y_S(x), ŷ(x)) — over the answered queries.

    ``hidden`` is ``None`` for the labels-only (PATE) student. Queries never answered keep their
    initial vectors: random, or ``init``'s (the public model: input and output layer). The
    model's curve holds the mean Eq. 3 loss of each epoch and, when ``validation`` (center,
    context) pairs are given, their log perplexity after the epoch.
    """
    student = SkipGramStudent(vocab_size, dim, generator, init)
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    curve = TrainingCurve("student")
    n = len(ids)
    for epoch in range(epochs if n else 0):
        order = torch.randperm(n, generator=generator, device=generator.device)
        total = 0.0
        for s in range(0, n, batch_size):
            batch = order[s:s + batch_size]
            h, logits = student(ids[batch])
            loss = output_loss(logits, labels[batch], loss_kind)
            if hidden is not None:
                loss = loss + hidden_weight * ((h - hidden[batch]) ** 2).sum(dim=-1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
        val = math.nan
        if validation is not None:
            with torch.no_grad():
                val = math.log(perplexity(student.to_word_model(), *validation))
        curve.add(epoch + 1, total / n, val)
    model = student.to_word_model()
    model.curve = curve
    return model
