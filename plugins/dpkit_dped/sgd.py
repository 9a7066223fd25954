"""The skip-gram trained by (DP-)SGD: model, per-document clipped gradients, the training loop.

The privacy unit is a document: each sample is ``P`` (center, context) pairs drawn afresh from one
document at every step, so per-sample clipping bounds one document's influence. Batches are
Poisson-sampled with rate q (each document independently).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from dpkit import TrainingCurve
from dpkit_dped.clipping import clip_factors, gathered_clipped_sum
from dpkit_dped.corpus import draw_pairs
from dpkit_dped.evaluation import perplexity
from dpkit_dped.skipgram import WordModel


class SkipGramNS(nn.Module):
    """Skip-gram with negative sampling: input and output embeddings ``[V, d]``."""

    def __init__(self, vocab_size: int, dim: int, generator: torch.Generator):
        super().__init__()
        self.inp = nn.Embedding(vocab_size, dim)
        self.out = nn.Embedding(vocab_size, dim)
        with torch.no_grad():
            self.inp.weight.copy_((torch.rand(vocab_size, dim, generator=generator,
                                              device=generator.device) - 0.5) / dim)
            self.out.weight.zero_()

    @staticmethod
    def document_losses(v: torch.Tensor, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-document loss ``[B]`` from center rows ``[B, P, d]`` and target rows ``[B, P, 1+K, d]``
        (``[..., 0, :]`` the true context, the rest negatives): sum over the unmasked pairs, so a
        document's gradient norm is comparable to the clipping norm rather than P times below it."""
        scores = (u * v.unsqueeze(-2)).sum(-1)      # [B, P, 1+K]
        sign = torch.ones_like(scores)
        sign[..., 1:] = -1.0
        pair_loss = -nn.functional.logsigmoid(sign * scores).sum(-1)
        return (pair_loss * mask).sum(-1)

    def forward(self, centers: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-document loss ``[B]``; ``targets[..., 0]`` is the true context, the rest negatives."""
        return self.document_losses(self.inp(centers), self.out(targets), mask)

    def word_model(self) -> WordModel:
        """The input and output tables as a :class:`WordModel`."""
        return WordModel(self.inp.weight.detach().clone(), self.out.weight.detach().clone())


def sparse_clipped_sum(model: SkipGramNS, centers, targets, mask, max_norm: float):
    """(clipped per-document gradient sums for ``[inp, out]``, norms, losses) from gathered rows."""
    return gathered_clipped_sum(
        [model.inp.weight, model.out.weight], [centers, targets],
        lambda v, u: SkipGramNS.document_losses(v, u, mask), max_norm)


def opacus_clipped_sum(module, centers, targets, mask, max_norm: float):
    """The same from Opacus' materialized per-sample gradients (``GradSampleModule``, sum reduction)."""
    params = [module._module.inp.weight, module._module.out.weight]
    for p in params:
        p.grad_sample = None
    with warnings.catch_warnings():  # Opacus hooks on embeddings whose inputs need no grad
        warnings.simplefilter("ignore", UserWarning)
        losses = module(centers, targets, mask)
        losses.sum().backward()
    per_sample = [p.grad_sample.reshape(len(centers), -1) for p in params]
    norms = torch.cat(per_sample, dim=1).norm(dim=1)
    factors = clip_factors(norms, max_norm)
    sums = [torch.einsum("b,bvd->vd", factors, p.grad_sample) for p in params]
    for p in params:
        p.grad, p.grad_sample = None, None
    return sums, norms, losses.detach()


def train_on_pairs(n: int, draw: Callable, neg_probs: torch.Tensor, *, dim: int, negatives: int,
                   noise_multiplier: float, max_grad_norm: float, sampling_rate: float, steps: int,
                   lr: float, generator: torch.Generator, opacus_accountant=None,
                   clipping: str = "sparse",
                   validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                   curve_points: int = 20, optimizer: str = "sgd", momentum: float = 0.9,
                   init: WordModel | None = None,
                   release: Callable[[list[torch.Tensor]], list[torch.Tensor]] | None = None,
                   on_batch: Callable[[torch.Tensor], None] | None = None,
                   ) -> WordModel:
    """Run ``steps`` DP-SGD steps over ``n`` documents; returns the model with its curve.

    Each step Poisson-samples documents at rate q, takes their (center, context) pairs from
    ``draw(batch ids, generator)`` (``[B, P]`` centers, contexts, mask), clips each document's
    gradient to ``max_grad_norm`` (``clipping``: ``sparse`` rows or Opacus' dense per-sample
    gradients), adds N(0, (z·C)²) to every coordinate of both tables and divides by the expected
    batch size (Opacus' convention), then takes an ``optimizer`` step (``sgd`` with ``momentum``,
    or ``adam``, whose per-coordinate scaling amplifies the noise on untouched rows).
    ``opacus_accountant``, when given, is stepped alongside so its ε can be compared with dpkit's
    ledger. The curve records, ``curve_points`` times, the mean training loss per pair since the
    last point and the validation pairs' log perplexity. ``init`` (a public model) replaces the
    random start: fine-tuning. ``release``, when given, carries each step's noisy gradients to
    the side that applies them (e.g. across ``ctx.wire``) and returns what arrived.
    ``on_batch``, when given, sees each step's sampled document ids (audits test their law).
    """
    dev = generator.device
    vocab_size = len(neg_probs)
    model = SkipGramNS(vocab_size, dim, generator).to(dev)
    if init is not None:
        with torch.no_grad():
            model.inp.weight.copy_(init.vectors)
            model.out.weight.copy_(init.out_vectors)
    params = [model.inp.weight, model.out.weight]
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    opt = (torch.optim.SGD(params, lr=lr, momentum=momentum) if optimizer == "sgd"
           else torch.optim.Adam(params, lr=lr))
    expected = max(1, round(sampling_rate * n))
    if clipping == "opacus":
        from opacus import GradSampleModule
        module = GradSampleModule(model, loss_reduction="sum")
        clipped = lambda c, t, m: opacus_clipped_sum(module, c, t, m, max_grad_norm)
    elif clipping == "sparse":
        clipped = lambda c, t, m: sparse_clipped_sum(model, c, t, m, max_grad_norm)
    else:
        raise ValueError(f"clipping must be 'sparse' or 'opacus', got {clipping!r}")
    curve, interval = TrainingCurve("DP-SGD skip-gram", unit="step"), max(1, steps // curve_points)
    seen, loss_sum = 0.0, 0.0
    for step in range(1, steps + 1):
        batch = (torch.rand(n, generator=generator, device=dev) < sampling_rate).nonzero().squeeze(1)
        if on_batch is not None:
            on_batch(batch)
        c, x, m = draw(batch, generator)
        neg = torch.multinomial(neg_probs, max(x.numel(), 1) * negatives, replacement=True,
                                generator=generator)[:x.numel() * negatives]
        sums, _, losses = clipped(c, torch.cat([x.unsqueeze(-1), neg.view(*x.shape, negatives)], -1), m)
        grads = []
        for p, total in zip(params, sums):  # an empty batch still releases the noise
            if noise_multiplier > 0:
                total = total + noise_multiplier * max_grad_norm * torch.randn(
                    p.shape, generator=generator, device=dev)
            grads.append(total / expected)
        for p, grad in zip(params, release(grads) if release is not None else grads):
            p.grad = grad
        opt.step()
        seen, loss_sum = seen + float(m.sum()), loss_sum + float(losses.sum())
        if opacus_accountant is not None:
            opacus_accountant.step(noise_multiplier=noise_multiplier, sample_rate=sampling_rate)
        if step % interval == 0 or step == steps:
            val = math.nan
            if validation is not None:
                val = math.log(perplexity(model.word_model(), *validation))
            curve.add(step, loss_sum / max(seen, 1), val)
            seen, loss_sum = 0.0, 0.0
    trained = model.word_model()
    trained.curve = curve
    return trained


def train_dpsgd_documents(tokens: torch.Tensor, lengths: torch.Tensor, neg_probs: torch.Tensor, *,
                          pairs_per_doc: int, window: int, **train) -> WordModel:
    """DP-SGD over documents ``tokens [n, L]`` (``lengths [n]``): each step draws
    ``pairs_per_doc`` fresh pairs within ``window`` from every sampled document; ``train`` as in
    :func:`train_on_pairs`."""
    dev = train["generator"].device

    def draw(batch, generator):
        return draw_pairs(tokens[batch].to(dev), lengths[batch].to(dev), pairs_per_doc, window,
                          generator)

    return train_on_pairs(len(tokens), draw, neg_probs, **train)


def train_dpsgd(centers: torch.Tensor, contexts: torch.Tensor, mask: torch.Tensor,
                neg_probs: torch.Tensor, **train) -> WordModel:
    """DP-SGD over documents given as fixed pairs ``[n, P]`` (centers, contexts, mask), e.g. the
    audit's canary documents; ``train`` as in :func:`train_on_pairs`."""
    dev = train["generator"].device

    def draw(batch, generator):
        return centers[batch].to(dev), contexts[batch].to(dev), mask[batch].to(dev)

    return train_on_pairs(len(centers), draw, neg_probs, **train)
