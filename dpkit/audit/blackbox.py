"""Black-box tests on samples: pick a distinguishing event on one half, bound ε on the other.

The event is chosen on a selection half of the draws (DP-Sniper / StatDP style) and its
probabilities under x and x' are bounded with Clopper–Pearson on the held-out half, so the lower
bound on ε holds at the stated confidence whatever the search looked at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from dpkit.audit.report import Finding
from dpkit.audit.stats import (
    epsilon_lower_bound,
    epsilon_point_estimate,
    wilson_epsilon_lower_bound,
)

TAIL_LEVELS = np.array([0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.035])
LEVELS = np.unique(np.concatenate([[0.0], TAIL_LEVELS, np.linspace(0.05, 0.95, 19),
                                   1 - TAIL_LEVELS, [1.0]]))
"""Quantile levels of the bin edges: dense in the tails, where pure-DP violations show."""


@dataclass
class Event:
    """A chosen output event: ``member(outputs) -> bool mask`` plus a description and direction."""

    member: Callable[[torch.Tensor], torch.Tensor]
    description: str
    swapped: bool  # True when the event is likelier under x' than under x
    score: float = -np.inf  # the selection-half lower bound that picked it


def _best_interval(a: np.ndarray, b: np.ndarray, delta: float) -> tuple[float, int, int, bool]:
    """Best [i, j) bin interval by selection-half lower bound, either direction."""
    n = max(int(a.sum()), 1)
    ca = np.concatenate([[0], np.cumsum(a)])
    cb = np.concatenate([[0], np.cumsum(b)])
    ka = ca[None, :] - ca[:, None]
    kb = cb[None, :] - cb[:, None]
    valid = np.triu(np.ones_like(ka, dtype=bool), 1)
    best = (-np.inf, 0, 1, False)
    for swapped, (k1, k2) in enumerate(((ka, kb), (kb, ka))):
        score = np.where(valid, wilson_epsilon_lower_bound(k1, k2, n, delta=delta), -np.inf)
        i, j = np.unravel_index(np.argmax(score), score.shape)
        if score[i, j] > best[0]:
            best = (float(score[i, j]), int(i), int(j), bool(swapped))
    return best


def continuous_event(sel_x: torch.Tensor, sel_xp: torch.Tensor,
                     statistics: dict[str, Callable[[torch.Tensor], torch.Tensor]],
                     delta: float) -> Event:
    """The interval event on one scalar statistic that best separates the selection halves."""
    best: tuple[float, Event] | None = None
    for name, stat in statistics.items():
        va = stat(sel_x).double().cpu().numpy()
        vb = stat(sel_xp).double().cpu().numpy()
        pooled = np.concatenate([va, vb])
        uniq = np.unique(pooled)
        if uniq.size < LEVELS.size:
            edges = np.concatenate([uniq, [np.inf]])
        else:
            edges = np.unique(np.quantile(pooled, LEVELS))
            edges[-1] = np.inf
        edges[0] = -np.inf
        a = np.histogram(va, edges)[0]
        b = np.histogram(vb, edges)[0]
        score, i, j, swapped = _best_interval(a, b, delta)
        lo, hi = float(edges[i]), float(edges[j])
        if best is None or score > best[0]:
            def member(out, _stat=stat, _lo=lo, _hi=hi):
                v = _stat(out)
                return (v >= _lo) & (v < _hi)
            best = (score, Event(member, f"{name} ∈ [{lo:.4g}, {hi:.4g})", swapped, score))
    assert best is not None
    return best[1]


def discrete_event(sel_x: torch.Tensor, sel_xp: torch.Tensor, tokens: list[str] | None,
                   delta: float) -> Event:
    """A set of output tokens at one position, chosen by sorted likelihood ratio (DP-Sniper)."""
    n, positions = sel_x.shape
    vocab = int(max(sel_x.max().item(), sel_xp.max().item())) + 2
    best: tuple[float, Event] | None = None
    for pos in range(positions):
        ca = torch.bincount(sel_x[:, pos].long() + 1, minlength=vocab).double().cpu().numpy()
        cb = torch.bincount(sel_xp[:, pos].long() + 1, minlength=vocab).double().cpu().numpy()
        for swapped, (c1, c2) in enumerate(((ca, cb), (cb, ca))):
            order = np.argsort(-(c1 + 0.5) / (c2 + 0.5), kind="stable")
            k1, k2 = np.cumsum(c1[order]), np.cumsum(c2[order])
            score = wilson_epsilon_lower_bound(k1, k2, n, delta=delta)
            m = int(np.argmax(score))
            if best is None or score[m] > best[0]:
                chosen = torch.as_tensor(order[: m + 1] - 1, device=sel_x.device)
                names = [(tokens[t] if tokens and 0 <= t < len(tokens) else str(t))
                         for t in chosen[:6].tolist()]
                more = f" … ({m + 1} tokens)" if m + 1 > 6 else ""

                def member(out, _pos=pos, _set=chosen):
                    return torch.isin(out[:, _pos], _set)
                best = (float(score[m]), Event(member, f"output[{pos}] ∈ {{{', '.join(names)}"
                                               f"{more}}}", bool(swapped), float(score[m])))
    assert best is not None
    return best[1]


def held_out_finding(event: Event, test_x: torch.Tensor, test_xp: torch.Tensor, alpha: float,
                     delta: float, *, strategy: str, pair: str, distance: float,
                     claimed: float) -> Finding:
    """Bound ε for ``event`` on the held-out draws (Clopper–Pearson at level ``alpha``)."""
    kx = int(event.member(test_x).sum().item())
    kxp = int(event.member(test_xp).sum().item())
    if event.swapped:
        kx, kxp = kxp, kx
    n = test_x.shape[0]
    return Finding(
        strategy=strategy, pair=pair + (" (x'→x)" if event.swapped else ""), distance=distance,
        claimed=claimed, measured=float(epsilon_lower_bound(kx, kxp, n, alpha, delta)),
        estimate=float(epsilon_point_estimate(kx, kxp, n, delta)), event=event.description,
        delta=delta, counts={"in_event_first": kx, "in_event_second": kxp, "n": n})


def continuous_statistics(sel_x: torch.Tensor, sel_xp: torch.Tensor, x: torch.Tensor,
                          x_prime: torch.Tensor,
                          log_ratio: Callable[[torch.Tensor], torch.Tensor] | None
                          ) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Scalar statistics of an output: projection on the mean difference, distances to x and x'
    (whole vector and along the most-changed coordinate), and the declared log-density ratio."""
    mean_x = sel_x.double().mean(0)
    direction = sel_xp.double().mean(0) - mean_x
    if direction.norm() == 0:
        direction = torch.ones_like(direction)
    direction = direction / direction.norm()
    stats: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "projection on mean difference": lambda y: (y.double() - mean_x) @ direction,
    }
    flat_x, flat_xp = x.reshape(-1).double(), x_prime.reshape(-1).double()
    if flat_x.numel() == sel_x.shape[1]:
        stats["‖y − x‖"] = lambda y: (y.double() - flat_x).norm(dim=1)
        stats["‖y − x'‖"] = lambda y: (y.double() - flat_xp).norm(dim=1)
        j = int((flat_x - flat_xp).abs().argmax())
        stats[f"|y[{j}] − x[{j}]|"] = lambda y: (y[:, j].double() - flat_x[j]).abs()
        stats[f"|y[{j}] − x'[{j}]|"] = lambda y: (y[:, j].double() - flat_xp[j]).abs()
    if log_ratio is not None:
        stats["declared log p(y|x) − log p(y|x')"] = log_ratio
    return stats
