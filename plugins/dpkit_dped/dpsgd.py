"""DP-SGD baseline: a torch skip-gram (negative sampling) trained with DP-SGD, one document per sample.

The privacy unit is a document, as for the teachers' shards: each sample is ``P`` (center, context)
pairs drawn from one document, so per-sample clipping bounds one document's influence. Batches are
Poisson-sampled with rate q (each document independently), matching the
``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` that the ledger composes ``steps`` times.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import torch
from dpkit.accounting import DpGuarantee, calibrate_noise, dpsgd_event
from dpkit.training import TrainingCurve
from pydantic import Field
from torch import nn

from dpkit_dped.clipping import clip_factors, gathered_clipped_sum
from dpkit_dped.corpus import document_tensor, draw_pairs, encode
from dpkit_dped.defenses import CorpusParams, privacy_settings, record, with_curves
from dpkit_dped.evaluation import perplexity
from dpkit_dped.pipeline import evaluate, prepare
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
        (``[..., 0, :]`` the true context, the rest negatives): mean over the unmasked pairs."""
        scores = (u * v.unsqueeze(-2)).sum(-1)      # [B, P, 1+K]
        sign = torch.ones_like(scores)
        sign[..., 1:] = -1.0
        pair_loss = -nn.functional.logsigmoid(sign * scores).sum(-1)
        return (pair_loss * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)

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


def train_dpsgd(tokens: torch.Tensor, lengths: torch.Tensor, neg_probs: torch.Tensor, *,
                pairs_per_doc: int, window: int, dim: int, negatives: int, noise_multiplier: float,
                max_grad_norm: float, sampling_rate: float, steps: int, lr: float,
                generator: torch.Generator, opacus_accountant=None, clipping: str = "sparse",
                validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                curve_points: int = 20, optimizer: str = "sgd", momentum: float = 0.9) -> WordModel:
    """Run ``steps`` DP-SGD steps over documents ``tokens [n, L]``; returns the model with its curve.

    Each step Poisson-samples documents at rate q, draws ``pairs_per_doc`` fresh (center, context)
    pairs within ``window`` from each sampled document, clips each document's gradient to
    ``max_grad_norm`` (``clipping``: ``sparse`` rows or Opacus' dense per-sample gradients),
    adds N(0, (z·C)²) to every coordinate of both tables and divides by the expected batch size
    (Opacus' convention), then takes an ``optimizer`` step (``sgd`` with ``momentum``, or ``adam``,
    whose per-coordinate scaling amplifies the noise on rows no document touched). ``opacus_accountant``, when given, is stepped
    alongside so its ε can be compared with dpkit's ledger. The curve records, ``curve_points``
    times, the mean training loss of the batches since the last point and the validation pairs'
    log perplexity.
    """
    dev = generator.device
    n, vocab_size = len(tokens), len(neg_probs)
    model = SkipGramNS(vocab_size, dim, generator).to(dev)
    params = [model.inp.weight, model.out.weight]
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    opt = (torch.optim.SGD(params, lr=lr, momentum=momentum) if optimizer == "sgd"
           else torch.optim.Adam(params, lr=lr))
    expected = max(1, round(sampling_rate * n))
    if clipping == "opacus":
        from opacus import GradSampleModule
        module = GradSampleModule(model, loss_reduction="sum")
        clipped = lambda c, t, m: opacus_clipped_sum(module, c, t, m, max_grad_norm)  # noqa: E731
    elif clipping == "sparse":
        clipped = lambda c, t, m: sparse_clipped_sum(model, c, t, m, max_grad_norm)  # noqa: E731
    else:
        raise ValueError(f"clipping must be 'sparse' or 'opacus', got {clipping!r}")
    curve, interval = TrainingCurve("DP-SGD skip-gram", unit="step"), max(1, steps // curve_points)
    seen, loss_sum = 0, 0.0
    for step in range(1, steps + 1):
        batch = (torch.rand(n, generator=generator, device=dev) < sampling_rate).nonzero().squeeze(1)
        c, x, m = draw_pairs(tokens[batch].to(dev), lengths[batch].to(dev), pairs_per_doc, window,
                             generator)
        neg = torch.multinomial(neg_probs, max(x.numel(), 1) * negatives, replacement=True,
                                generator=generator)[:x.numel() * negatives]
        sums, _, losses = clipped(c, torch.cat([x.unsqueeze(-1), neg.view(*x.shape, negatives)], -1), m)
        for p, total in zip(params, sums):  # an empty batch still releases the noise
            noise = torch.randn(p.shape, generator=generator, device=dev)
            p.grad = (total + noise_multiplier * max_grad_norm * noise) / expected
        opt.step()
        seen, loss_sum = seen + len(batch), loss_sum + float(losses.sum())
        if opacus_accountant is not None:
            opacus_accountant.step(noise_multiplier=noise_multiplier, sample_rate=sampling_rate)
        if step % interval == 0 or step == steps:
            val = math.nan
            if validation is not None:
                val = math.log(perplexity(model.word_model(), *validation))
            curve.add(step, loss_sum / max(seen, 1), val)
            seen, loss_sum = 0, 0.0
    trained = model.word_model()
    trained.curve = curve
    return trained


class DpsgdParams(CorpusParams):
    """DP-SGD settings: Poisson rate q, steps, clipping norm, and pairs drawn per document.

    ``steps_by_epsilon`` maps a target ε to its step count (chosen on public data with
    ``python -m dpkit_dped.tune_steps``); other targets use ``steps``. σ is calibrated for the
    step count actually run.
    """

    target_epsilon: float = Field(2.0, gt=0)
    sampling_rate: float = Field(0.01, gt=0, le=1)
    steps: int = Field(400, ge=1)
    steps_by_epsilon: dict[float, int] = Field(default_factory=dict)
    max_grad_norm: float = Field(1.0, gt=0)
    pairs_per_doc: int = Field(32, ge=1)
    max_doc_len: int = Field(1000, ge=2)
    lr: float = Field(5.0, gt=0)
    optimizer: Literal["sgd", "adam"] = "sgd"
    momentum: float = Field(0.9, ge=0, lt=1)
    clipping: Literal["sparse", "opacus"] = "sparse"

    def step_count(self) -> int:
        """Steps run at this target ε."""
        return int(self.steps_by_epsilon.get(self.target_epsilon, self.steps))


class DpedDpsgd:
    """DP-SGD baseline: skip-gram trained with per-document clipping and Gaussian noise."""

    name = "dped_dpsgd"
    Params = DpsgdParams

    def __init__(self, params: DpsgdParams):
        self.params = params

    def noise_multiplier(self, delta: float, accountant: str) -> float:
        """z such that ``steps`` Poisson-sampled steps spend at most the target ε."""
        p = self.params
        return calibrate_noise(lambda z: dpsgd_event(z, p.sampling_rate, p.step_count()),
                               p.target_epsilon, delta, accountant)

    def spends_for(self, z: float) -> list:
        """Ledger entries for noise multiplier ``z``: one grouped entry, count = steps."""
        p = self.params
        label = f"DP-SGD step, one document per sample (C={p.max_grad_norm})"
        return [(DpGuarantee(dpsgd_event(z, p.sampling_rate, 1)), label, p.step_count())]

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.spends_for(self.noise_multiplier(privacy.delta, privacy.accountant))

    def run(self, ctx):
        """Calibrate, record, train with per-document clipping and noise, evaluate."""
        p = self.params
        z = self.noise_multiplier(*privacy_settings(ctx))
        record(ctx, self.spends_for(z))
        setup = prepare(ctx, p)
        tokens, lengths = document_tensor(encode(setup.private_texts, setup.vocab), p.max_doc_len)
        counts = torch.tensor(setup.vocab.counts, dtype=torch.float32, device=ctx.device)
        steps = p.step_count()
        ctx.say(f"dped_dpsgd: {steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}")
        model = train_dpsgd(tokens.to(ctx.device), lengths.to(ctx.device),
                            counts ** 0.75 / (counts ** 0.75).sum(), pairs_per_doc=p.pairs_per_doc,
                            window=p.window, dim=p.dim, negatives=p.negative,
                            noise_multiplier=z, max_grad_norm=p.max_grad_norm,
                            sampling_rate=p.sampling_rate, steps=steps, lr=p.lr,
                            generator=ctx.generator("dped-dpsgd"), clipping=p.clipping,
                            optimizer=p.optimizer, momentum=p.momentum,
                            validation=tuple(x.to(ctx.device) for x in setup.validation))
        metrics = evaluate(ctx, setup, model, p)
        metrics.update(target_epsilon=p.target_epsilon, noise_multiplier=z, steps=float(steps))
        return with_curves(metrics, [model])
