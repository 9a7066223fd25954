"""Per-channel canary audit of DPED / PATE's noisy aggregation (threshold, outputs, hidden mean).

The noise plan is the defense's own at its ``num_queries`` (the spec's query count: the σ a run
uses), recorded on the ledger as a run records it; canaries are extra queries at that plan, so
more canaries buy power instead of spreading ε thinner. Each channel gets its own m queries, one
per canary, built at that channel's worst-case neighbour (one teacher changes its output), run
through the plug-in's :func:`aggregate` and scored by that channel's likelihood ratio under the
declared σ; the claim is the ε the ledger charges that channel for one query. Law tests (the
release must follow the declared noise) are what catch too little noise at a realistic plan,
where σ is far too large for any bound to reach the claim.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from dpkit import (
    ChannelRun,
    DpGuarantee,
    Ledger,
    binomial_p_value,
    counts_p_value,
    gaussian_llr_p_value,
)
from dpkit_dped.privacy import THRESHOLD_SENSITIVITY, VOTES_SENSITIVITY


def channel_epsilon(sigma: float | None, sensitivity: float, delta: float, accountant: str) -> float:
    """ε at δ the ledger charges one Gaussian release of std σ (∞ when it has no noise)."""
    import dp_accounting

    if sigma is None or not sigma > 0:
        return math.inf
    ledger = Ledger(delta=delta, accountant=accountant)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(sigma / sensitivity)), "channel")
    return ledger.epsilon()


def outputs(teachers: int, vocab: int, m: int, base: dict[int, float], soft: bool) -> torch.Tensor:
    """The other teachers' summed outputs ``[m, V]``: ``base`` label → count, the rest of the
    N − 1 − Σ base teachers spread (one label each, hard) or uniform over V (soft)."""
    summed = torch.zeros(m, vocab)
    for label, count in base.items():
        summed[:, label] += count
    rest = teachers - 1 - sum(base.values())
    if soft:
        summed += rest / vocab
    else:
        for i in range(int(rest)):
            summed[:, 2 + i % (vocab - 2)] += 1
    return summed


def canary_output(included: np.ndarray, vocab: int, soft_out: bool) -> torch.Tensor:
    """The canary teacher's output ``[m, V]``: one-hot on label 0 if included, else one-hot on
    label 1 (``soft_out``: uniform, a simplex point that moves no entry by more than 1/V)."""
    keep = torch.as_tensor(included, dtype=torch.bool)
    out = torch.zeros(len(included), vocab)
    out[keep, 0] = 1.0
    out[~keep] = torch.full((vocab,), 1.0 / vocab) if soft_out else torch.eye(vocab)[1]
    return out


PROBES = 20000
"""Law probes per channel: extra queries, not canaries, where every teacher agrees on label 0 of
two, so the top count sits as far from the threshold (and the label as far from a tie) as the
teachers allow; their answered rate and winning label test the declared σ with power at any σ."""


def agreement(teachers: int, n: int) -> torch.Tensor:
    """``[n, 2]`` summed outputs where all teachers vote label 0."""
    full = torch.zeros(n, 2)
    full[:, 0] = teachers
    return full


def threshold_channel(aggregate, plan, p, included, claim, gen) -> ChannelRun:
    """The answered bit; top count straddles the threshold (in: r + ½ side, out: one below)."""
    soft, vocab, m = p.target == "soft", p.teachers + 2, len(included)
    below = max(0, math.ceil(p.threshold_votes) - 1)   # others' votes on label 0
    summed = outputs(p.teachers, vocab, m, {0: min(below, p.teachers - 1)}, soft)
    summed += canary_output(included, vocab, soft_out=soft)
    agg = aggregate(None, summed, plan, threshold=p.threshold_votes, clip=1.0, generator=gen)
    top = summed.max(-1).values.double().numpy()
    sigma = plan.sigma_threshold
    bit = agg.answered.cpu().numpy()
    if sigma is None:
        return ChannelRun("threshold", np.where(bit, 1.0, -1.0), claim, None,
                          "noiseless threshold (faithful, ε = ∞): no law to test")
    prob = stats.norm.sf(p.threshold_votes, loc=top, scale=sigma)
    in_p, out_p = float(prob[included].mean()), float(prob[~included].mean())
    with np.errstate(divide="ignore"):
        llr = np.where(bit, np.log(in_p) - np.log(out_p), np.log1p(-in_p) - np.log1p(-out_p))
    probe = aggregate(None, agreement(p.teachers, PROBES), plan, threshold=p.threshold_votes,
                      clip=1.0, generator=gen)
    expected = float(stats.norm.sf(p.threshold_votes, loc=p.teachers, scale=sigma))
    tests = [binomial_p_value(int(bit[included].sum()), int(included.sum()), in_p),
             binomial_p_value(int(bit[~included].sum()), int((~included).sum()), out_p),
             binomial_p_value(int(probe.answered.sum()), PROBES, expected)]
    return ChannelRun("threshold", np.nan_to_num(llr, posinf=1e6, neginf=-1e6), claim,
                      min(1.0, 3 * min(tests)), "answered rates against N(top, σ₁²) > r")


def output_channel(aggregate, plan, p, included, claim, gen) -> ChannelRun:
    """Soft: the noisy sum, canary moves one vertex to another (shift √2). Hard: the noisy
    argmax, two labels one vote apart and the canary deciding which leads."""
    soft, vocab, m = p.target == "soft", p.teachers + 2, len(included)
    half = (p.teachers - 1) // 2
    others = outputs(p.teachers, vocab, m, {} if soft else {0: half, 1: half}, soft)
    summed = others + canary_output(included, vocab, soft_out=False)
    agg = aggregate(None, summed, plan, threshold=p.threshold_votes, clip=1.0, generator=gen)
    sigma = plan.sigma_votes
    diff = torch.zeros(vocab, dtype=torch.float64)
    diff[0], diff[1] = 1.0, -1.0
    if soft:
        mid = summed.double() - (diff / 2).unsqueeze(0) * torch.as_tensor(
            np.where(included, 1.0, -1.0)).unsqueeze(1)
        llr = ((agg.soft.double() - mid) @ diff).numpy() / sigma ** 2
        shift = VOTES_SENSITIVITY / sigma
        return ChannelRun("outputs", llr, claim, gaussian_llr_p_value(llr, included, shift),
                          "likelihood ratio of the noisy sum against N(sum, σ²I)")
    base = others[0].double()
    draws = max(20000, 20 * m)
    freq, sims = {}, {}
    for side, d in (("in", 0), ("out", 1)):
        h = base.clone()
        h[d] += 1
        noisy = h.float() + sigma * torch.randn(draws, vocab, generator=gen)
        sims[side] = torch.bincount(noisy.argmax(-1).clamp(max=2), minlength=3).double().numpy()
        freq[side] = (sims[side] + 0.5) / (draws + 1.5)
    released = agg.labels.cpu().clamp(max=2).numpy()
    llr = (np.log(freq["in"]) - np.log(freq["out"]))[released]
    obs_in = np.bincount(released[included], minlength=3)
    obs_out = np.bincount(released[~included], minlength=3)
    probe = aggregate(None, agreement(p.teachers, PROBES), plan, threshold=p.threshold_votes,
                      clip=1.0, generator=gen)
    won = float(stats.norm.cdf(p.teachers / (sigma * math.sqrt(2))))
    tests = [counts_p_value(obs_in, sims["in"]), counts_p_value(obs_out, sims["out"]),
             binomial_p_value(int((probe.labels == 0).sum()), PROBES, won)]
    law = min(1.0, 3 * min(tests))
    return ChannelRun("outputs", llr, claim, law,
                      "noisy-argmax label frequencies, canaries and agreement probes")


def hidden_channel(aggregate, plan, p, included, claim, gen) -> ChannelRun:
    """The noisy clipped mean: the canary teacher's raw vector is ±K·C·e (K so large that without
    clipping its mean would move 20 σ), the others 0; scored by ⟨h, e⟩·Δ/σ², Δ = 2C/N."""
    m, sigma, delta_h = len(included), plan.sigma_hidden, plan.hidden_sens
    dim = min(p.dim, 16)
    k = max(4.0, 20 * sigma / delta_h)
    e = torch.nn.functional.normalize(torch.randn(m, dim, generator=gen), dim=-1)
    sign = torch.as_tensor(np.where(included, 1.0, -1.0), dtype=torch.float32).unsqueeze(1)
    vectors = torch.zeros(p.teachers, m, dim)
    vectors[0] = k * p.clip * sign * e
    summed = outputs(p.teachers, p.teachers + 2, m, {}, soft=True)
    agg = aggregate(vectors, summed, plan, threshold=p.threshold_votes, clip=p.clip, generator=gen)
    llr = (agg.hidden.double() * e.double()).sum(-1).numpy() * delta_h / sigma ** 2
    return ChannelRun("hidden", llr, claim, gaussian_llr_p_value(llr, included, delta_h / sigma),
                      "likelihood ratio of the noisy mean against N(mean, σ²I)",
                      {"raw_norm_over_clip": k})


def audit_channels(aggregate, plan, p, included, uses_hidden: bool, delta: float,
                   accountant: str, gen: torch.Generator) -> list[ChannelRun]:
    """Every channel the plan releases, each on its own m canary queries."""
    included = np.asarray(included, bool)
    runs = [threshold_channel(aggregate, plan, p, included,
                              channel_epsilon(plan.sigma_threshold, THRESHOLD_SENSITIVITY, delta,
                                              accountant), gen),
            output_channel(aggregate, plan, p, included,
                           channel_epsilon(plan.sigma_votes, VOTES_SENSITIVITY, delta, accountant),
                           gen)]
    if uses_hidden:
        runs.append(hidden_channel(aggregate, plan, p, included,
                                   channel_epsilon(plan.sigma_hidden, plan.hidden_sens, delta,
                                                   accountant), gen))
    return runs
