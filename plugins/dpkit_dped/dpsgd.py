"""DP-SGD baseline: a torch skip-gram (negative sampling) trained with Opacus, one document per sample.

The privacy unit is a document, as for the teachers' shards: each sample is ``P`` (center, context)
pairs drawn from one document, so per-sample clipping bounds one document's influence. Batches are
Poisson-sampled with rate q (each document independently), matching the
``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` that the ledger composes ``steps`` times.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from dpkit.accounting import DpGuarantee, calibrate_noise, dpsgd_event
from dpkit.protocols import DefenseResult
from pydantic import Field
from torch import nn

from dpkit_dped.corpus import doc_pair_tensor, encode
from dpkit_dped.defenses import CorpusParams, privacy_settings, record
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

    def forward(self, centers: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-document loss ``[B]``; ``targets[..., 0]`` is the true context, the rest negatives."""
        v = self.inp(centers)                       # [B, P, d]
        u = self.out(targets)                       # [B, P, 1+K, d]
        scores = (u * v.unsqueeze(-2)).sum(-1)      # [B, P, 1+K]
        sign = torch.ones_like(scores)
        sign[..., 1:] = -1.0
        pair_loss = -nn.functional.logsigmoid(sign * scores).sum(-1)
        return (pair_loss * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)


def train_dpsgd(centers: torch.Tensor, contexts: torch.Tensor, mask: torch.Tensor,
                neg_probs: torch.Tensor, *, dim: int, negatives: int, noise_multiplier: float,
                max_grad_norm: float, sampling_rate: float, steps: int, lr: float,
                generator: torch.Generator, opacus_accountant=None) -> WordModel:
    """Run ``steps`` Opacus DP-SGD steps over documents ``[n, P]``; returns the trained model.

    ``opacus_accountant`` (an ``opacus.accountants`` accountant), when given, is stepped alongside
    so its ε can be compared with dpkit's ledger.
    """
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    dev = generator.device
    n, vocab_size = len(centers), len(neg_probs)
    model = GradSampleModule(SkipGramNS(vocab_size, dim, generator).to(dev))
    expected = max(1, round(sampling_rate * n))
    opt = DPOptimizer(torch.optim.Adam(model.parameters(), lr=lr), noise_multiplier=noise_multiplier,
                      max_grad_norm=max_grad_norm, expected_batch_size=expected, generator=generator)
    for _ in range(steps):
        batch = (torch.rand(n, generator=generator, device=dev) < sampling_rate).nonzero().squeeze(1)
        opt.zero_grad(set_to_none=True)
        if len(batch):
            c, x, m = centers[batch].to(dev), contexts[batch].to(dev), mask[batch].to(dev)
            neg = torch.multinomial(neg_probs, x.numel() * negatives, replacement=True,
                                    generator=generator).view(*x.shape, negatives)
            with warnings.catch_warnings():  # Opacus hooks on embeddings whose inputs need no grad
                warnings.simplefilter("ignore", UserWarning)
                model(c, torch.cat([x.unsqueeze(-1), neg], dim=-1), m).mean().backward()
            opt.step()
        else:  # an empty Poisson batch still releases a noise-only update
            for p in model.parameters():
                p.grad = noise_multiplier * max_grad_norm / expected * torch.randn(
                    p.shape, generator=generator, device=dev)
            opt.original_optimizer.step()
        if opacus_accountant is not None:
            opacus_accountant.step(noise_multiplier=noise_multiplier, sample_rate=sampling_rate)
    inner = model._module if hasattr(model, "_module") else model
    return WordModel(inner.inp.weight.detach().clone(), inner.out.weight.detach().clone())


class DpsgdParams(CorpusParams):
    """DP-SGD settings: Poisson rate q, steps, clipping norm, and pairs drawn per document."""

    target_epsilon: float = Field(2.0, gt=0)
    sampling_rate: float = Field(0.01, gt=0, le=1)
    steps: int = Field(400, ge=1)
    max_grad_norm: float = Field(1.0, gt=0)
    pairs_per_doc: int = Field(32, ge=1)
    lr: float = Field(0.005, gt=0)


class DpedDpsgd:
    """DP-SGD baseline (Opacus): skip-gram trained with per-document clipping and Gaussian noise."""

    name = "dped_dpsgd"
    Params = DpsgdParams

    def __init__(self, params: DpsgdParams):
        self.params = params

    def noise_multiplier(self, delta: float, accountant: str) -> float:
        """z such that ``steps`` Poisson-sampled steps spend at most the target ε."""
        p = self.params
        return calibrate_noise(lambda z: dpsgd_event(z, p.sampling_rate, p.steps),
                               p.target_epsilon, delta, accountant)

    def spends_for(self, z: float) -> list:
        """Ledger entries for noise multiplier ``z``: one grouped entry, count = steps."""
        p = self.params
        label = f"DP-SGD step, one document per sample (C={p.max_grad_norm})"
        return [(DpGuarantee(dpsgd_event(z, p.sampling_rate, 1)), label, p.steps)]

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.spends_for(self.noise_multiplier(privacy.delta, privacy.accountant))

    def run(self, ctx) -> DefenseResult:
        """Calibrate, record, train with Opacus, evaluate."""
        p = self.params
        z = self.noise_multiplier(*privacy_settings(ctx))
        record(ctx, self.spends_for(z))
        setup = prepare(ctx, p)
        docs = encode(setup.private_texts, setup.vocab)
        rng = np.random.default_rng(ctx.numpy_seed("dped-dpsgd-pairs"))
        centers, contexts, mask = doc_pair_tensor(docs, p.window, p.pairs_per_doc, rng)
        counts = torch.tensor(setup.vocab.counts, dtype=torch.float32, device=ctx.device)
        ctx.say(f"dped_dpsgd: {p.steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}")
        model = train_dpsgd(centers.to(ctx.device), contexts.to(ctx.device), mask.to(ctx.device),
                            counts ** 0.75 / (counts ** 0.75).sum(), dim=p.dim, negatives=p.negative,
                            noise_multiplier=z, max_grad_norm=p.max_grad_norm,
                            sampling_rate=p.sampling_rate, steps=p.steps, lr=p.lr,
                            generator=ctx.generator("dped-dpsgd"))
        metrics = evaluate(ctx, setup, model, p)
        metrics.update(target_epsilon=p.target_epsilon, noise_multiplier=z)
        return DefenseResult(metrics)
