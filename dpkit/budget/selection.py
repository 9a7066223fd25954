"""The cost of releasing only the best cell of a sweep, and of private hyperparameter search.

Papernot and Steinke, "Hyperparameter Tuning with Renyi Differential Privacy" (ICLR 2022): run a
DP mechanism Q a **random** number K of times (K truncated negative binomial with shape η —
η = 0 logarithmic, η = 1 geometric — or Poisson), each time with a hyperparameter setting drawn at
random, and release only the best (candidate, score); if Q is (λ, ε)-RDP the whole search is
(λ, ε′)-RDP with ε′ a small multiple of ε (their Theorems 2 and 6). dp-accounting carries the
bound as ``RepeatAndSelectDpEvent``: :func:`best_of_random_runs` composes it,
:func:`draw_repetitions` draws the K the bound assumes. With a **fixed** number of runs no such
bound holds in general (a fixed K = m can leak as much as composing all m runs), so dpkit charges
a fixed grid — what ``dpkit run`` executes — as the composition of every candidate
(:func:`release_best_ledger`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import dp_accounting
import numpy as np
from dp_accounting.dp_event import RepeatAndSelectDpEvent
from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

from dpkit.accounting import Ledger, NoGuarantee, epsilon_of
from dpkit.base.errors import AccountingError

DISTRIBUTIONS = {"logarithmic": 0.0, "geometric": 1.0, "poisson": math.inf}
"""Named shapes of the number of repetitions (any shape η > 0 is a truncated negative binomial)."""

SELECTIONS = ("none", "public", "private")


def _shape(distribution: str | float) -> float:
    if isinstance(distribution, str):
        if distribution not in DISTRIBUTIONS:
            raise AccountingError(f"unknown distribution {distribution!r}; use one of "
                                  f"{', '.join(DISTRIBUTIONS)} or a shape η ≥ 0")
        return DISTRIBUTIONS[distribution]
    if not distribution >= 0:
        raise AccountingError(f"the shape of the repetitions must be ≥ 0, got {distribution!r}")
    return float(distribution)


def repeat_and_select(run: dp_accounting.DpEvent, mean: float,
                      distribution: str | float = "poisson") -> dp_accounting.DpEvent:
    """dp-accounting's event for releasing the best of K ~ ``distribution`` (mean ``mean``) runs."""
    if not (mean >= 1 and math.isfinite(mean)):
        raise AccountingError(f"the mean number of repetitions must be a finite number ≥ 1, got "
                              f"{mean!r}")
    return RepeatAndSelectDpEvent(run, float(mean), _shape(distribution))


def best_of_random_runs(run: dp_accounting.DpEvent, mean: float, delta: float,
                        distribution: str | float = "poisson",
                        orders: Sequence[float] | None = None) -> float:
    """ε at ``delta`` of releasing the best of a random number of runs of ``run`` (RDP)."""
    return epsilon_of(repeat_and_select(run, mean, distribution), delta, "rdp", orders)


def draw_repetitions(mean: float, distribution: str | float, rng: np.random.Generator) -> int:
    """Draw K as :func:`best_of_random_runs` assumes (Poisson may give 0: then release nothing)."""
    shape = _shape(distribution)
    if not mean >= 1:
        raise AccountingError(f"the mean number of repetitions must be ≥ 1, got {mean!r}")
    if math.isinf(shape):
        return int(rng.poisson(mean))
    gamma = _gamma_truncated_negative_binomial(shape, mean)  # the γ the accountant analyses
    if shape == 0:  # P[K = k] ∝ (1 - γ)^k / k
        return int(rng.logseries(1 - gamma))
    return _truncated_negative_binomial(shape, 1 - gamma, rng.random())


def _truncated_negative_binomial(shape: float, q: float, u: float) -> int:
    """The k ≥ 1 where the CDF of P[K = k] ∝ C(k + η - 1, k) q^k first reaches ``u`` ∈ [0, 1).

    Inverse-CDF sampling (O(mean) steps), exact as γ = 1 - q → 1 (a mean near 1), where drawing
    the untruncated law until K ≥ 1 would loop for ever: at γ = 1 every draw is 0. The running sum
    can converge, by rounding, a few ulps short of u · Σ for u near 1; the draw then stops where
    the sum stops growing (waiting for the terms to underflow to 0 hung: for q > 1/2 a subnormal
    term times q rounds back to itself).
    """
    target = u * math.expm1(-shape * math.log1p(-q))  # u · Σ_{k≥1} C(k + η - 1, k) q^k
    k, term = 1, shape * q
    total = term
    while total < target:
        term *= (k + shape) / (k + 1) * q
        k += 1
        before, total = total, total + term
        if total == before:  # the sum stopped growing short of the target (rounding, u near 1)
            break
    return k


def release_best_ledger(candidates: Ledger, selection: str, metric: str | None,
                        score_in_ledger: bool = False) -> Ledger | None:
    """The ledger of releasing only the best of ``candidates`` (a fixed grid), or None for none.

    ``public``: the score reads public data only, so choosing is post-processing of the
    candidates' releases — free, but the choice depends on every candidate, so the release costs
    their composition. ``private``: the same when every candidate's ledger already covers its
    score (``score_in_ledger``); otherwise the choice reads private data with no noise, which no
    DP bound covers: ε = ∞.
    """
    if selection not in SELECTIONS:
        raise AccountingError(f"unknown selection {selection!r}; use one of {', '.join(SELECTIONS)}")
    if selection == "none":
        return None
    chosen = Ledger(delta=candidates.delta_target, accountant=candidates.accountant,
                    neighboring=candidates.neighboring)
    for spend in candidates.spends:
        chosen.spend(spend.guarantee, spend.label, spend.count)
    if selection == "private" and not score_in_ledger:
        chosen.spend(NoGuarantee(f"the best cell is chosen by {metric!r} on private data without "
                                 "noise; no DP bound covers that choice (Papernot & Steinke's "
                                 "needs a DP score and a random number of runs)"), "selection")
    return chosen
