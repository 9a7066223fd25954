"""Canary audits of the DPED family (registered through ``dpkit_register_defense_audits``).

``dped_dpsgd``: the defense's own calibration, ledger spends and :func:`train_dpsgd` on a small
synthetic corpus; each canary is one document of a (center, context) pair of two tokens no other
document uses, scored by the trained model's logit for that pair.

``dped`` / ``dped_pate``: the defense's own noise plan (at its ``num_queries``), ledger spends and
:func:`aggregate` on synthetic teacher outputs (and vectors), audited per channel
(:mod:`dpkit_dped.audit_aggregation`): threshold bit, outputs (noisy sum or argmax label), hidden
mean, each at its own worst-case neighbour with its own likelihood ratio and law test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dpkit import CanaryRun, Ledger
from dpkit_dped.aggregation import aggregate
from dpkit_dped.audit_aggregation import audit_channels
from dpkit_dped.defenses import privacy_settings, record
from dpkit_dped.dpsgd import train_dpsgd

BACKGROUND_TOKENS = 64
BACKGROUND_DOCS = 1000


@dataclass
class DpsgdCanaryAudit:
    """One DP-SGD run of ``defense`` with canary documents; ``train`` is the defense's trainer."""

    defense: Any

    @property
    def train(self) -> Callable[..., Any]:
        """The defense's trainer (``train_function`` where it defines one, else train_dpsgd)."""
        return getattr(self.defense, "train_function", train_dpsgd)

    def audit_run(self, ctx, included: np.ndarray) -> CanaryRun:
        """Calibrate z, record the spends, train on background + included canaries, score all."""
        p, m = self.defense.params, len(included)
        delta, accountant = privacy_settings(ctx)
        z = self.defense.noise_multiplier(delta, accountant)
        spends = self.defense.spends_for(z)
        record(ctx, spends)
        charged = sum(count for _g, _label, count in spends)
        gen = ctx.generator("dpsgd-audit")
        pairs = p.pairs_per_doc
        background = torch.randint(BACKGROUND_TOKENS, (BACKGROUND_DOCS, pairs, 2), generator=gen)
        canary_center = BACKGROUND_TOKENS + 2 * torch.arange(m)
        canary_context = canary_center + 1
        keep = torch.as_tensor(included, dtype=torch.bool)
        inserted = torch.stack([canary_center[keep], canary_context[keep]], -1)
        docs = torch.cat([background, inserted.unsqueeze(1).expand(-1, pairs, -1)])
        vocab = BACKGROUND_TOKENS + 2 * m
        counts = torch.zeros(vocab)
        counts[:BACKGROUND_TOKENS] = 1.0
        steps = p.step_count()  # the steps the defense's run trains
        ctx.say(f"{steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}, {len(docs)} documents")
        sizes: list[int] = []
        model = self.train(docs[..., 0].to(ctx.device), docs[..., 1].to(ctx.device),
                           torch.ones(len(docs), pairs, device=ctx.device),
                           (counts / counts.sum()).to(ctx.device), dim=p.dim,
                           negatives=p.negative, noise_multiplier=z, max_grad_norm=p.max_grad_norm,
                           sampling_rate=p.sampling_rate, steps=steps, lr=p.lr, generator=gen,
                           on_batch=lambda batch: sizes.append(len(batch)))
        v, u = model.vectors.cpu(), model.out_vectors.cpu()
        scores = (v[canary_center] * u[canary_context]).sum(-1).double().numpy()
        law = {}
        if p.optimizer == "sgd" and z > 0:
            untouched = u[canary_context[~keep]].double().numpy()
            std = noise_row_std(z, p.max_grad_norm, max(1, round(p.sampling_rate * len(docs))),
                                p.lr, p.momentum, charged)
            law["untouched rows"] = (variance_p_value(untouched / std),
                                     "output rows no document touches must be the declared "
                                     f"noise alone: N(0, {std:.3g}²) after {charged} charged steps")
        rate = charged_sampling_rate(spends)
        law["batch sizes"] = (batch_size_p_value(sizes, len(docs), rate),
                              f"Poisson sampling: each step's batch must be Binomial({len(docs)}, "
                              f"q={rate:g}), the rate the ledger's events charge")
        return CanaryRun(scores, ctx.ledger.epsilon(), ctx.ledger.delta_target,
                         "document (one canary document added or removed)",
                         {"noise_multiplier": z, "documents": len(docs), "steps_trained": steps,
                          "steps_charged": charged}, law=law)


def noise_row_std(z: float, clip: float, expected_batch: int, lr: float, momentum: float,
                  steps: int) -> float:
    """Std of one coordinate of an output row no document touches, which starts at 0 and moves
    only by the noise: SGD with momentum μ adds −lr·Σₛ wₛ·N(0, (zC/B)²), wₛ = Σ_{t≥s} μ^{t−s}."""
    s = np.arange(1, steps + 1)
    w = (1 - momentum ** (steps - s + 1)) / (1 - momentum)
    return float(lr * z * clip / expected_batch * np.sqrt((w ** 2).sum()))


def charged_sampling_rate(spends: list) -> float:
    """The Poisson sampling rate q of the DP-SGD events the spends put on the ledger."""
    rates = {g.event.sampling_probability for g, _label, _count in spends
             if hasattr(getattr(g, "event", None), "sampling_probability")}
    if len(rates) != 1:
        raise ValueError(f"expected one Poisson-sampled DP-SGD event among the spends, got {rates}")
    return float(rates.pop())


def batch_size_p_value(sizes: list[int], documents: int, rate: float) -> float:
    """Two-sided exact p-value that the summed batch sizes of ``len(sizes)`` steps are
    Binomial(steps·documents, rate): the sampler draws at the rate the ledger charges."""
    from scipy import stats

    if not sizes:
        return 1.0
    return float(stats.binomtest(int(sum(sizes)), len(sizes) * documents, rate).pvalue)


def variance_p_value(standardized: np.ndarray) -> float:
    """Two-sided chi-square p-value that standardized values have variance 1."""
    from scipy import stats

    x = np.asarray(standardized, float).ravel()
    if x.size == 0:
        return 1.0
    chi = float((x ** 2).sum())
    return float(min(1.0, 2 * min(stats.chi2.cdf(chi, x.size), stats.chi2.sf(chi, x.size))))


@dataclass
class AggregationCanaryAudit:
    """DPED / PATE's aggregation at the defense's own noise plan, audited channel by channel."""

    defense: Any

    def audit_run(self, ctx, included: np.ndarray) -> CanaryRun:
        """Plan noise for the defense's ``num_queries``, record the spends, then give each channel
        (threshold, outputs, hidden) its own m canary queries through :func:`aggregate`."""
        p = self.defense.params
        delta, accountant = privacy_settings(ctx)
        plan = self.defense.noise_plan(delta, accountant)
        record(ctx, plan.spends())
        per_query = Ledger(delta=delta, accountant=accountant)
        for guarantee, label, _count in plan.spends():
            per_query.spend(guarantee, label)
        aggregator = getattr(self.defense, "aggregate_function", aggregate)
        ctx.say(f"aggregating {len(included)} canary queries per channel over {p.teachers} "
                f"teachers at the plan for {plan.queries} queries")
        channels = audit_channels(aggregator, plan, p, included, self.defense.uses_hidden,
                                  delta, accountant, ctx.generator("aggregation-audit"))
        scores = np.clip(sum(c.scores for c in channels), -1e6, 1e6)
        return CanaryRun(scores, per_query.epsilon(), delta,
                         "teacher output on one query (one teacher's data changed)",
                         {"run_epsilon": ctx.ledger.epsilon(), "queries_planned": plan.queries,
                          "sigma_votes": plan.sigma_votes,
                          "sigma_threshold": plan.sigma_threshold or 0.0,
                          "sigma_hidden": plan.sigma_hidden or 0.0}, channels)


AUDITS = {"dped_dpsgd": DpsgdCanaryAudit, "dped": AggregationCanaryAudit,
          "dped_pate": AggregationCanaryAudit}
"""Canary-audit adapter per defense name (registered by the plug-in's hook)."""
