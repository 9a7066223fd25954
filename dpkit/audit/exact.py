"""Exact strategies from declared output laws, and the checks that the sampler obeys that law."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from dpkit.audit.claims import Claim
from dpkit.audit.report import Finding
from dpkit.audit.stats import epsilon_at_delta, hoeffding_lower

GOF_BINS = 5


def density_log_ratio(mechanism: object, x: torch.Tensor, x_prime: torch.Tensor):
    """``y -> log p(y|x) − log p(y|x')`` from the mechanism's declared ``log_density``."""
    def log_ratio(y: torch.Tensor) -> torch.Tensor:
        xs = x.reshape(1, -1).to(device=y.device, dtype=y.dtype).expand_as(y)
        xps = x_prime.reshape(1, -1).to(device=y.device, dtype=y.dtype).expand_as(y)
        return (mechanism.log_density(xs, y) - mechanism.log_density(xps, y)).double()
    return log_ratio


def continuous_exact(log_ratio, samples_x: torch.Tensor, samples_xp: torch.Tensor,
                     x: torch.Tensor, x_prime: torch.Tensor, claim: Claim, claimed: float,
                     alpha: float, *, pair: str, distance: float) -> Finding:
    """Privacy loss of the declared density at the draws and on the line through x and x'."""
    t = torch.linspace(-3.0, 4.0, 141, dtype=torch.float64, device=samples_x.device)
    fx, fxp = x.reshape(-1).double(), x_prime.reshape(-1).double()
    line = (fx + t[:, None] * (fxp - fx)).to(samples_x.dtype)
    loss_x = log_ratio(samples_x)
    loss_xp = -log_ratio(samples_xp)
    if claim.delta <= 0:
        points = torch.cat([loss_x, loss_xp, log_ratio(line).abs()])
        k = int(points.argmax())
        measured = float(points[k])
        where = ("a draw under x" if k < len(loss_x) else "a draw under x'"
                 if k < len(loss_x) + len(loss_xp) else
                 f"y = x + {float(t[k - len(loss_x) - len(loss_xp)]):.3g}·(x' − x)")
        return Finding("exact density", pair, distance, claimed, measured, measured,
                       f"declared density ratio at {where}", 0.0)
    losses = loss_x.cpu().numpy()
    n = losses.size

    def delta_lb(eps: float) -> float:
        return hoeffding_lower(float(np.clip(1 - np.exp(eps - losses), 0, None).mean()), n, alpha)

    lo, hi = 0.0, float(max(losses.max(), 0.0)) + 1e-9
    if delta_lb(lo) <= claim.delta:
        measured = 0.0
    else:
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if delta_lb(mid) > claim.delta else (lo, mid)
        measured = lo
    return Finding("exact density (privacy-loss distribution)", pair, distance, claimed, measured,
                   measured, f"Hoeffding bound on δ(ε) from {n} draws", claim.delta)


def density_consistency(log_ratio, samples_x: torch.Tensor, samples_xp: torch.Tensor) -> float:
    """p-value that the draws follow the declared density (importance-weight identity).

    If ``y ~ p(·|x)`` then ``E[1_B(y)·p(y|x')/p(y|x)] = P[y' ∈ B]`` for ``y' ~ p(·|x')``:
    compared in both directions on quantile bins B of the declared log-ratio, Bonferroni-combined.
    """
    lx = log_ratio(samples_x).cpu().numpy()
    lxp = log_ratio(samples_xp).cpu().numpy()
    edges = np.quantile(np.concatenate([lx, lxp]), np.linspace(0, 1, GOF_BINS + 1))
    edges[0], edges[-1] = -np.inf, np.inf
    p_min = 1.0
    for own, other, sign in ((lx, lxp, 1.0), (lxp, lx, -1.0)):
        weights = np.exp(np.clip(-sign * own, -700, 700))
        for lo, hi in zip(edges[:-1], edges[1:]):
            direct = ((other >= lo) & (other < hi)).astype(float)
            weighted = ((own >= lo) & (own < hi)) * weights
            se = math.sqrt(direct.var() / direct.size + weighted.var() / weighted.size)
            diff = direct.mean() - weighted.mean()
            if se == 0:
                p = 1.0 if diff == 0 else 0.0
            else:
                p = 2 * stats.norm.sf(abs(diff) / se)
            p_min = min(p_min, p)
    return min(1.0, p_min * 2 * GOF_BINS)


def discrete_consistency(log_probs: torch.Tensor, draws: torch.Tensor) -> float:
    """Chi-square p-value that ``draws`` (token ids) follow ``log_probs`` ``[V]`` (cells pooled
    until each expects ≥ 5)."""
    n = draws.numel()
    probs = log_probs.double().exp().cpu().numpy()
    probs = probs / probs.sum()
    observed = torch.bincount(draws.long().reshape(-1).cpu(), minlength=probs.size).numpy()
    if observed.size > probs.size:  # an output outside the declared support
        return 0.0 if observed[probs.size:].sum() else 1.0
    order = np.argsort(-probs)
    big = probs[order] * n >= 5
    exp_cells = list(probs[order][big] * n)
    obs_cells = list(observed[order][big])
    rest_e, rest_o = probs[order][~big].sum() * n, observed[order][~big].sum()
    if rest_e > 0 or rest_o > 0:
        if rest_e == 0:
            return 0.0
        exp_cells.append(rest_e)
        obs_cells.append(rest_o)
    if len(exp_cells) < 2:
        return 1.0
    return float(stats.chisquare(obs_cells, exp_cells).pvalue)


def discrete_exact(log_probs: torch.Tensor, distances: torch.Tensor, claim: Claim,
                   groups: torch.Tensor | None, tokens: list[str], ids: list[int]
                   ) -> tuple[Finding | None, Finding | None]:
    """Exact worst pair over ``log_probs`` ``[m, V]``: (largest excess over the claim, largest
    measured/claimed ratio); ``groups`` (k-anonymity) restricts pairs to one anonymity set."""
    lp = log_probs.double().cpu()
    m = lp.shape[0]
    values = torch.empty(m, m, dtype=torch.float64)
    where = torch.zeros(m, m, dtype=torch.long)
    for i in range(m):
        diff = torch.where(torch.isfinite(lp[i]).unsqueeze(0), lp[i].unsqueeze(0) - lp,
                           torch.tensor(-math.inf, dtype=torch.float64)).nan_to_num(nan=-math.inf)
        best, where[i] = diff.max(dim=1)
        if claim.delta > 0:
            best = torch.tensor([epsilon_at_delta(lp[i].numpy(), lp[j].numpy(), claim.delta)
                                 for j in range(m)], dtype=torch.float64)
        values[i] = best
    dist = distances.double().cpu()
    claims = dist * claim.eta if claim.kind == "metric" else torch.full_like(dist, claim.epsilon)
    allowed = ~torch.eye(m, dtype=torch.bool)
    if groups is not None:
        allowed &= groups.cpu().unsqueeze(0) == groups.cpu().unsqueeze(1)
    if not allowed.any():
        return None, None
    neg = torch.tensor(-math.inf, dtype=torch.float64)
    margin = torch.where(allowed, (values - claims).nan_to_num(nan=-math.inf), neg)
    ratio = torch.where(allowed, (values / claims.clamp_min(1e-300)).nan_to_num(nan=-math.inf), neg)

    def finding(flat: int) -> Finding:
        i, j = divmod(flat, m)
        y = int(where[i, j])
        name = tokens[y] if y < len(tokens) else str(y)
        return Finding("exact output probabilities", f"{tokens[ids[i]]!r} vs {tokens[ids[j]]!r}",
                       float(dist[i, j]), float(claims[i, j]), float(values[i, j]),
                       float(values[i, j]), f"output token {name!r}", claim.delta)

    return finding(int(margin.argmax())), finding(int(ratio.argmax()))
