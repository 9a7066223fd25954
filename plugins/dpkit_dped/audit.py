"""Canary audits of the DPED family (registered through ``dpkit_register_defense_audits``).

``dped_dpsgd``: the defense's own calibration, ledger spends and :func:`train_dpsgd` on a small
synthetic corpus; each canary is one document of a (center, context) pair of two tokens no other
document uses, scored by the trained model's logit for that pair.

``dped`` / ``dped_pate``: the defense's own noise plan, ledger spends and :func:`aggregate` on
synthetic teacher outputs (and vectors); each canary is one query whose output one teacher moves
from one vertex of the probability simplex to another (a one-hot vote: the worst case of both
the hard and the soft sensitivity), scored from what the defense releases for its ``target``: the
noisy argmax label (hard) or the whole noisy sum of teacher outputs (soft), plus the threshold bit
and the hidden mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dpkit.accounting import Ledger
from dpkit.audit.canary import CanaryRun
from dpkit_dped.aggregation import aggregate, vote_histogram
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
        record(ctx, self.defense.spends_for(z))
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
        steps = p.step_count()  # the steps z was calibrated for and the ledger charges
        ctx.say(f"{steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}, {len(docs)} documents")
        model = self.train(docs[..., 0].to(ctx.device), docs[..., 1].to(ctx.device),
                           torch.ones(len(docs), pairs, device=ctx.device),
                           (counts / counts.sum()).to(ctx.device), dim=p.dim,
                           negatives=p.negative, noise_multiplier=z, max_grad_norm=p.max_grad_norm,
                           sampling_rate=p.sampling_rate, steps=steps, lr=p.lr, generator=gen)
        v, u = model.vectors.cpu(), model.out_vectors.cpu()
        scores = (v[canary_center] * u[canary_context]).sum(-1).double().numpy()
        return CanaryRun(scores, ctx.ledger.epsilon(), ctx.ledger.delta_target,
                         "document (one canary document added or removed)",
                         {"noise_multiplier": z, "documents": len(docs)})


@dataclass
class AggregationCanaryAudit:
    """One noisy aggregation of ``defense`` (DPED or PATE) where each query is a canary."""

    defense: Any

    def audit_run(self, ctx, included: np.ndarray) -> CanaryRun:
        """Plan noise for m queries, record the spends, aggregate canary votes, score each query."""
        p, m = self.defense.params, len(included)
        delta, accountant = privacy_settings(ctx)
        run = type(self.defense)(p.model_copy(update={"num_queries": m}))
        plan = run.noise_plan(delta, accountant)
        record(ctx, plan.spends())
        per_query = Ledger(delta=delta, accountant=accountant)
        for guarantee, label, _count in plan.spends():
            per_query.spend(guarantee, label)
        gen = ctx.generator("aggregation-audit")
        votes, vectors, directions = canary_votes(included, p.teachers, p.threshold_votes,
                                                  getattr(p, "clip", 1.0), p.dim, gen)
        aggregator = getattr(self.defense, "aggregate_function", aggregate)
        ctx.say(f"aggregating {m} canary queries over {p.teachers} teachers")
        agg = aggregator(vectors if run.uses_hidden else None, vote_histogram(votes, p.teachers + 2),
                         plan, threshold=p.threshold_votes, clip=getattr(p, "clip", 1.0),
                         generator=gen)
        scores = threshold_llr(agg.answered, plan, p.threshold_votes)
        if agg.soft is not None:
            scores += soft_llr(agg.soft, votes, plan.sigma_votes, p.teachers + 2)
        else:
            scores += label_llr(agg.labels, votes, plan.sigma_votes, p.teachers + 2, gen)
        if agg.hidden is not None:
            shift = 2 * getattr(p, "clip", 1.0) / p.teachers
            scores += (agg.hidden * directions).sum(-1).double().numpy() * shift / plan.sigma_hidden ** 2
        return CanaryRun(np.clip(scores, -1e6, 1e6), per_query.epsilon(), delta,
                         "teacher vote on one query (one teacher's data changed)",
                         {"run_epsilon": ctx.ledger.epsilon(), "sigma_votes": plan.sigma_votes,
                          "sigma_threshold": plan.sigma_threshold or 0.0})


def canary_votes(included: np.ndarray, teachers: int, threshold: float, clip: float, dim: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Votes ``[N, m]`` where the top count of query i is ⌈r⌉ if canary i is included, else one
    less (teacher 0 moves its vote to a label of its own), and teacher vectors ``[N, m, dim]``
    where teacher 0's clipped vector is +C·eᵢ if included, else −C·eᵢ; also the directions eᵢ."""
    m, top = len(included), max(1, int(np.ceil(threshold)))
    if teachers < top + 1:
        raise ValueError(f"the aggregation audit needs more teachers ({teachers}) than the "
                         f"threshold ({threshold}); raise teachers")
    keep = torch.as_tensor(included, dtype=torch.bool)
    votes = (torch.arange(teachers) + 2).unsqueeze(1).repeat(1, m)   # a label each: count 1
    votes[1:top] = 0                                                 # top − 1 votes for label 0
    votes[0] = torch.where(keep, 0, 1)                               # canary: label 0 or 1
    directions = torch.nn.functional.normalize(torch.randn(m, dim, generator=generator), dim=-1)
    vectors = torch.zeros(teachers, m, dim)
    vectors[0] = clip * torch.where(keep.unsqueeze(1), directions, -directions)
    return votes, vectors, directions


def neighbour_histograms(votes: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed outputs of one canary query with the canary included (teacher 0 on label 0) and
    excluded (teacher 0 on label 1), ``[V]`` each."""
    base = votes[:, :1].clone()
    out = []
    for label in (0, 1):
        base[0, 0] = label
        out.append(vote_histogram(base, vocab_size)[0])
    return out[0], out[1]


def soft_llr(released: torch.Tensor, votes: torch.Tensor, sigma: float, vocab_size: int) -> np.ndarray:
    """Exact log-likelihood ratio (included vs not) of each released noisy sum ``[m, V]`` under the
    declared Gaussian noise: ⟨x − (μ_in + μ_out)/2, μ_in − μ_out⟩ / σ²."""
    inside, outside = neighbour_histograms(votes, vocab_size)
    centred = released.double() - (inside + outside).double() / 2
    return (centred @ (inside - outside).double()).numpy() / sigma ** 2


def label_llr(labels: torch.Tensor, votes: torch.Tensor, sigma: float, vocab_size: int,
              generator: torch.Generator, draws: int = 20000) -> np.ndarray:
    """Log-likelihood ratio of each released noisy-argmax label (0, 1 or another) under the
    declared vote noise, estimated from ``draws`` simulated histograms of both neighbours;
    entries within two standard errors of 0 are set to 0 (simulation noise is no evidence)."""
    freq = {}
    for side, h in zip(("in", "out"), neighbour_histograms(votes, vocab_size)):
        noisy = h + sigma * torch.randn(draws, vocab_size, generator=generator)
        top = noisy.argmax(-1).clamp(max=2)  # 0, 1 or "another label"
        freq[side] = (torch.bincount(top, minlength=3).double() + 0.5) / (draws + 1.5)
    table = freq["in"].log() - freq["out"].log()
    stderr = ((1 - freq["in"]) / (freq["in"] * draws) + (1 - freq["out"]) / (freq["out"] * draws)).sqrt()
    table = torch.where(table.abs() > 2 * stderr, table, 0.0).numpy()
    return table[labels.cpu().clamp(max=2).numpy()]


def threshold_llr(answered: torch.Tensor, plan, threshold: float) -> np.ndarray:
    """Log-likelihood ratio (included vs not) of each answered bit under the declared threshold
    noise: the top count is ⌈r⌉ or ⌈r⌉ − 1."""
    from scipy import stats

    top = max(1, int(np.ceil(threshold)))
    sigma = plan.sigma_threshold
    if sigma is None:  # noiseless threshold: the bit is the canary
        p_in, p_out = float(top >= threshold), float(top - 1 >= threshold)
    else:
        p_in = stats.norm.sf(threshold, loc=top, scale=sigma)
        p_out = stats.norm.sf(threshold, loc=top - 1, scale=sigma)
    bit = answered.cpu().numpy()
    with np.errstate(divide="ignore"):
        llr = np.where(bit, np.log(p_in) - np.log(p_out), np.log1p(-p_in) - np.log1p(-p_out))
    return np.nan_to_num(llr, posinf=1e6, neginf=-1e6)


AUDITS = {"dped_dpsgd": DpsgdCanaryAudit, "dped": AggregationCanaryAudit,
          "dped_pate": AggregationCanaryAudit}
"""Canary-audit adapter per defense name (registered by the plug-in's hook)."""
