"""ε lower bounds from canary guesses: the one-run audit and the repeated-runs Clopper–Pearson bound.

One run (Steinke, Nasr and Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023):
m canaries are each included with probability ½, the auditor guesses "included" for r of them
(abstaining on the rest) and gets v right. Under (ε, δ)-DP the number right is dominated by a
Binomial(r, e^ε/(1+e^ε)) plus a δ-term (their Theorem 3.3 / Algorithm 2), which gives a p-value for
each ε; the lower bound is the largest ε rejected at the stated confidence.

Repeated runs (Jagielski, Ullman and Oprea, "Auditing Differentially Private Machine Learning: How
Private is Private SGD?", NeurIPS 2020; Nasr et al., "Adversary Instantiation", IEEE S&P 2021):
each score comes from its own run on one of two neighbouring inputs, and ε ≥ log((TPR − δ)/FPR)
with Clopper–Pearson bounds on both rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import optimize, special, stats

Thresholds = Literal["grid", "hull"]


def one_run_p_value(m: int, guesses: int, correct: int, epsilon: float, delta: float) -> float:
    """P[≥ ``correct`` right of ``guesses``] under (ε, δ)-DP with ``m`` canaries (Steinke et al.)."""
    if correct <= 0:
        return 1.0
    q = special.expit(epsilon)
    beta = float(stats.binom.sf(correct - 1, guesses, q))
    if delta == 0:
        return beta
    shifts = np.arange(1, correct + 1)
    gains = stats.binom.sf(correct - shifts - 1, guesses, q) - beta
    alpha = float(np.max(gains / shifts, initial=0.0))
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_epsilon(m: int, guesses: int, correct: int, confidence: float, delta: float,
                    floor: float = 0.0) -> float:
    """Largest ε whose (ε, δ) claim ``guesses``/``correct`` refute at ``confidence`` (≥ ``floor``)."""
    significance = 1.0 - confidence
    if guesses == 0 or one_run_p_value(m, guesses, correct, floor, 0.0) > significance:
        return floor

    def excess(eps: float) -> float:
        return significance - one_run_p_value(m, guesses, correct, eps, delta)

    if excess(floor) <= 0:
        return floor
    lo, hi = floor, max(1.0, 2 * floor)
    while excess(hi) > 0:
        lo, hi = hi, 2 * hi
    return float(optimize.brentq(excess, lo, hi, xtol=1e-6))


def one_run_reach(m: int, confidence: float, delta: float) -> float:
    """The largest ε :func:`epsilon_from_scores` can show with ``m`` canaries: every guess right."""
    ks = guess_grid(m)
    level = 1.0 - (1.0 - confidence) / len(ks)
    return max(one_run_epsilon(m, int(k), int(k), level, delta) for k in ks)


@dataclass(frozen=True)
class GuessResult:
    """The best guess set found: its ε bound, how many guesses, how many right, the threshold."""

    epsilon: float
    guesses: int
    correct: int
    threshold: float
    candidates: int


def guess_counts(in_scores, out_scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each threshold t (every distinct score, then +∞): t, #in with score ≥ t, #out ≥ t."""
    ins, outs = np.sort(np.asarray(in_scores, float)), np.sort(np.asarray(out_scores, float))
    if ins.size == 0 or outs.size == 0:
        raise ValueError(f"need scores of included and of excluded canaries, got {ins.size} "
                         f"and {outs.size}; raise the number of canaries")
    if not (np.isfinite(ins).all() and np.isfinite(outs).all()):
        raise ValueError("canary scores must be finite; map certainties to large finite values")
    thresholds = np.concatenate([np.union1d(ins, outs), [np.inf]])
    tp = ins.size - np.searchsorted(ins, thresholds, side="left")
    fp = outs.size - np.searchsorted(outs, thresholds, side="left")
    return thresholds, tp, fp


def roc_hull(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Indices of the upper convex hull of the ROC points (fp, tp), ordered by threshold."""
    order = np.arange(len(tp))[::-1]  # thresholds descending → fp, tp ascending
    hull: list[int] = []
    for i in order:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (fp[b] - fp[a]) * (tp[i] - tp[a]) - (tp[b] - tp[a]) * (fp[i] - fp[a])
            if cross >= 0:
                hull.pop()
            else:
                break
        hull.append(int(i))
    return np.array(sorted(hull))


def guess_grid(m: int, points: int = 16) -> np.ndarray:
    """Numbers of guesses to try, fixed before looking at scores: geometric from 1 to m/2."""
    top = max(1, m // 2)
    return np.unique(np.geomspace(1, top, min(points, top)).round().astype(int))


def epsilon_from_scores(in_scores, out_scores, confidence: float, delta: float,
                        thresholds: Thresholds = "grid") -> GuessResult:
    """One-run ε lower bound from canary scores (higher = guessed included), best guess set.

    ``"grid"``: guess "included" for the k highest scores (ties in a label-blind random order),
    for each k of
    :func:`guess_grid`, a family fixed before the scores are seen, so a Bonferroni correction over
    its size makes the choice of k free. ``"hull"``: thresholds on the ROC convex hull with a
    Bonferroni correction over the hull's size — jax_privacy's
    ``CanaryScoreAuditor.epsilon_one_run`` — which looks at the labels to pick its candidates.
    """
    ins, outs = np.asarray(in_scores, float), np.asarray(out_scores, float)
    m = ins.size + outs.size
    if thresholds == "grid":
        guess_counts(ins, outs)  # validates
        labels = np.concatenate([np.ones(ins.size, bool), np.zeros(outs.size, bool)])
        # ties must not be broken by label: shuffle (label-blind, seeded), then sort stably
        shuffle = np.random.default_rng(0).permutation(m)
        order = shuffle[np.argsort(-np.concatenate([ins, outs])[shuffle], kind="stable")]
        ranked = np.cumsum(labels[order])
        ks = guess_grid(m)
        tp, guesses = ranked[ks - 1], ks
        ts = np.concatenate([ins, outs])[order][ks - 1]
    else:
        ts, tp, fp = guess_counts(ins, outs)
        keep = roc_hull(tp, fp)
        ts, tp, guesses = ts[keep], tp[keep], (tp + fp)[keep]
    significance = (1.0 - confidence) / len(ts)
    with np.errstate(invalid="ignore"):
        precision_lb = 1.0 - _cp_upper(guesses - tp, guesses, significance)
    best = GuessResult(0.0, 0, 0, math.inf, len(ts))
    best_q = 0.5
    for i in np.argsort(-precision_lb, kind="stable"):
        r, v = int(guesses[i]), int(tp[i])
        if r == 0 or v / r <= best_q:
            continue
        eps = one_run_epsilon(m, r, v, 1.0 - significance, delta, floor=best.epsilon)
        if eps > best.epsilon:
            best = GuessResult(eps, r, v, float(ts[i]), len(ts))
            best_q = special.expit(eps)
    return best


def _cp_upper(k: np.ndarray | int, n: np.ndarray | int, significance: float) -> np.ndarray:
    k, n = np.asarray(k, float), np.asarray(n, float)
    safe = np.where(k < n, k, n - 1)
    upper = stats.beta.ppf(1 - significance, safe + 1, np.maximum(n - safe, 1))
    return np.where(k < n, upper, 1.0)


def clopper_pearson_epsilon(tp: int, positives: int, fp: int, negatives: int, confidence: float,
                            delta: float = 0.0) -> float:
    """ε ≥ log((TPR_lb − δ) / FPR_ub) with one-sided Clopper–Pearson bounds at (1−confidence)/2."""
    half = (1.0 - confidence) / 2
    tpr_lb = 1.0 - float(_cp_upper(positives - tp, positives, half))
    fpr_ub = float(_cp_upper(fp, negatives, half))
    if tpr_lb <= delta:
        return 0.0
    return max(0.0, math.log(tpr_lb - delta) - math.log(fpr_ub))


def repeated_runs_epsilon(in_scores, out_scores, confidence: float, delta: float = 0.0
                          ) -> GuessResult:
    """Repeated-runs bound: each score from its own run; best threshold, Bonferroni over all."""
    ts, tp, fp = guess_counts(in_scores, out_scores)
    pos, neg = int(tp[0]), int(fp[0])
    level = 1.0 - (1.0 - confidence) / len(ts)
    best = GuessResult(0.0, 0, 0, math.inf, len(ts))
    for i in range(len(ts)):
        both = (clopper_pearson_epsilon(int(tp[i]), pos, int(fp[i]), neg, level, delta),
                clopper_pearson_epsilon(neg - int(fp[i]), neg, pos - int(tp[i]), pos, level, delta))
        eps = max(both)
        if eps > best.epsilon:
            best = GuessResult(eps, int(tp[i] + fp[i]), int(tp[i]), float(ts[i]), len(ts))
    return best
