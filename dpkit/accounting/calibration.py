"""Noise calibration for a target (ε, δ): σ through ``dp_accounting.calibrate_dp_mechanism``.

Conservative: the returned σ is checked with a fresh accountant and nudged up until its ε is at
most the target. The classical σ = Δ·√(2 ln(1.25/δ))/ε is not used (it only holds for ε < 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import dp_accounting

from dpkit.accounting import events as ev
from dpkit.base.errors import AccountingError

LOWER_SIGMA = {"rdp": 1e-3, "pld": 2e-2}
"""Smallest noise multiplier searched (positive: σ = 0 has ε = ∞; PLD tables blow up near 0)."""
MAX_NUDGES = 60
MAX_HALVINGS = 1100
"""Halving any positive float reaches the floor in fewer steps (the double exponent spans 2¹⁰⁷⁴)."""


def _check_target(target_epsilon: float, delta: float) -> None:
    if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
        raise AccountingError(f"target epsilon must be a positive finite number, got "
                              f"{target_epsilon!r}")
    if not 0 < delta < 1:
        raise AccountingError(f"delta must lie in (0, 1) for calibration, got {delta!r}")


def _bracket(epsilon: Callable[[float], float], target: float, start: float,
             floor: float) -> tuple[float, float] | float:
    """(lo, hi) with ε(lo) > target ≥ ε(hi), or ``floor`` when even the floor meets the target."""
    hi = start
    for _ in range(60):
        if epsilon(hi) <= target:
            break
        hi *= 2
    else:
        raise AccountingError(f"no σ up to {hi:g} reaches ε={target:g}; the event's ε may not "
                              "decrease with σ")
    lo = hi / 2
    for _ in range(MAX_HALVINGS):
        if epsilon(lo) > target:
            return lo, hi
        if lo <= floor:
            return floor
        hi, lo = lo, max(lo / 2, floor)
    raise AccountingError(f"no bracket for ε={target:g} between σ={floor:g} and {start:g}; the "
                          "event's ε may not decrease with σ")


def calibrate_noise(make_event: Callable[[float], dp_accounting.DpEvent], target_epsilon: float,
                    delta: float, accountant: str = "rdp", *, tol: float = 1e-6,
                    orders: Sequence[float] | None = None, neighboring: str = "add_remove",
                    discretization: float | None = None) -> float:
    """Smallest σ (up to ``tol``) whose event ``make_event(σ)`` has ε ≤ ``target_epsilon`` at δ.

    ``orders`` (RDP), ``discretization`` (PLD) and ``neighboring`` are those of the ledger the
    noise will be charged to, so the σ found is the one that ledger accepts.
    """
    _check_target(target_epsilon, delta)
    ev.check_accountant(accountant)
    settings = {"neighboring": neighboring, "discretization": discretization}

    def fresh() -> dp_accounting.PrivacyAccountant:
        return ev.make_accountant(accountant, orders, **settings)

    def epsilon(sigma: float) -> float:
        return float(fresh().compose(make_event(sigma)).get_epsilon(delta))

    ev.check_supported(make_event(1.0), accountant, orders, neighboring, what="calibration")
    # RDP's ε bounds PLD's from above, so the RDP σ is a safe start for the PLD search.
    start = 1.0
    if accountant == "pld" and ev.supports(make_event(1.0), "rdp", neighboring):
        start = calibrate_noise(make_event, target_epsilon, delta, "rdp", tol=tol,
                                neighboring=neighboring)
    bracket = _bracket(epsilon, target_epsilon, start, LOWER_SIGMA[accountant])
    if isinstance(bracket, float):
        return bracket
    try:
        sigma = float(dp_accounting.calibrate_dp_mechanism(
            fresh, make_event, target_epsilon, delta,
            bracket_interval=dp_accounting.ExplicitBracketInterval(*bracket), tol=tol))
    except ValueError as exc:
        raise AccountingError(f"could not calibrate σ for ε={target_epsilon:g}, δ={delta:g} "
                              f"with {accountant}: {exc}; check the event and the target") from exc
    step = max(tol, sigma * 1e-9)
    for _ in range(MAX_NUDGES):
        if epsilon(sigma) <= target_epsilon:
            return sigma
        sigma += step
        step *= 2
    raise AccountingError(f"calibrated σ={sigma:g} still exceeds ε={target_epsilon:g}; "
                          "the event's ε may not decrease with σ")


def calibrate_gaussian(target_epsilon: float, delta: float, *, sampling_rate: float = 1.0,
                       steps: int = 1, sensitivity: float = 1.0, accountant: str = "rdp",
                       orders: Sequence[float] | None = None,
                       discretization: float | None = None) -> float:
    """Noise std for ``steps`` (Poisson-subsampled) Gaussian releases of L2 ``sensitivity``."""
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise AccountingError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
    ev.dpsgd_event(1.0, sampling_rate, steps)  # validates rate and steps with clear messages
    multiplier = calibrate_noise(lambda s: ev.dpsgd_event(s, sampling_rate, steps),
                                 target_epsilon, delta, accountant, orders=orders,
                                 discretization=discretization)
    return multiplier * sensitivity
