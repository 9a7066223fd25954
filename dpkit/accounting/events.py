"""Pure functions over dp-accounting events: grouping, composition, ε(δ), δ(ε), RDP curves.

No hand-written RDP or PLD lives here: every number comes from dp-accounting's accountants.
Identical events are grouped into one ``SelfComposedDpEvent`` before composing, which turns
"200 distinct compositions" into one (PLD composition cost grows with each distinct event).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import dp_accounting
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.errors import AccountingError

ACCOUNTANTS = ("rdp", "pld")
PLD_DISCRETIZATION = 1e-4
"""dp-accounting's default PLD value-discretisation interval (pessimistic rounding)."""


def check_accountant(name: str) -> str:
    """Validate an accountant name (``"rdp"`` or ``"pld"``) and return it."""
    if name not in ACCOUNTANTS:
        raise AccountingError(f"unknown accountant {name!r}; choose one of {', '.join(ACCOUNTANTS)}")
    return name


def make_accountant(name: str = "rdp", orders: Sequence[float] | None = None
                    ) -> dp_accounting.PrivacyAccountant:
    """A fresh dp-accounting accountant: RDP (optionally on custom orders) or PLD."""
    if check_accountant(name) == "rdp":
        return RdpAccountant(orders=list(orders) if orders is not None else None)
    if orders is not None:
        raise AccountingError("RDP orders were given but the accountant is 'pld'; drop the orders "
                              "or use accountant='rdp'")
    return PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)


def event_key(event: dp_accounting.DpEvent) -> Hashable:
    """A key under which equal events group (the event itself, or its repr if unhashable)."""
    try:
        hash(event)
        return event
    except TypeError:  # ComposedDpEvent holds a list
        return repr(event)


def group_events(spends: Iterable[tuple[dp_accounting.DpEvent, int]]
                 ) -> list[tuple[dp_accounting.DpEvent, int]]:
    """Merge (event, count) pairs with equal events, summing counts, first-seen order kept."""
    grouped: dict[Hashable, list] = {}
    for event, count in spends:
        if count < 0:
            raise AccountingError(f"a spend count must be ≥ 0, got {count!r}")
        slot = grouped.setdefault(event_key(event), [event, 0])
        slot[1] += int(count)
    return [(event, count) for event, count in grouped.values() if count > 0]


def composed_event(grouped: Sequence[tuple[dp_accounting.DpEvent, int]]) -> dp_accounting.DpEvent:
    """One event for grouped spends: ``SelfComposedDpEvent`` per kind inside a ``ComposedDpEvent``."""
    parts = [event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count)
             for event, count in grouped]
    if not parts:
        return dp_accounting.NoOpDpEvent()
    return parts[0] if len(parts) == 1 else dp_accounting.ComposedDpEvent(parts)


def _composed_accountant(event: dp_accounting.DpEvent, accountant: str,
                         orders: Sequence[float] | None) -> dp_accounting.PrivacyAccountant:
    acct = make_accountant(accountant, orders)
    if not acct.supports(event):
        raise AccountingError(f"the {accountant.upper()} accountant cannot compose {event!r}; "
                              f"try accountant={'pld' if accountant == 'rdp' else 'rdp'!r} or "
                              "describe the mechanism with a supported DpEvent")
    return acct.compose(event)


def epsilon_of(event: dp_accounting.DpEvent, delta: float, accountant: str = "rdp",
               orders: Sequence[float] | None = None) -> float:
    """ε of ``event`` at ``delta`` with the named dp-accounting accountant."""
    if not 0 <= delta < 1:
        raise AccountingError(f"delta must lie in [0, 1), got {delta!r}")
    return float(_composed_accountant(event, accountant, orders).get_epsilon(delta))


def delta_of(event: dp_accounting.DpEvent, epsilon: float, accountant: str = "rdp",
             orders: Sequence[float] | None = None) -> float:
    """δ of ``event`` at ``epsilon`` with the named dp-accounting accountant."""
    if not epsilon >= 0:
        raise AccountingError(f"epsilon must be ≥ 0, got {epsilon!r}")
    return float(_composed_accountant(event, accountant, orders).get_delta(epsilon))


def rdp_curve(event: dp_accounting.DpEvent, orders: Sequence[float]) -> list[float]:
    """Rényi-DP ε(α) of ``event`` at each order α (dp-accounting's RDP accountant)."""
    return [float(v) for v in _composed_accountant(event, "rdp", orders).rdp]


def dpsgd_event(noise_multiplier: float, sampling_rate: float, steps: int) -> dp_accounting.DpEvent:
    """DP-SGD as an event: ``steps`` compositions of a Poisson-subsampled Gaussian."""
    if not noise_multiplier > 0:
        raise AccountingError(f"noise multiplier must be > 0, got {noise_multiplier!r}")
    if not 0 < sampling_rate <= 1:
        raise AccountingError(f"sampling rate must lie in (0, 1], got {sampling_rate!r}")
    if steps < 1:
        raise AccountingError(f"steps must be ≥ 1, got {steps!r}")
    step = dp_accounting.GaussianDpEvent(noise_multiplier)
    if sampling_rate < 1:
        step = dp_accounting.PoissonSampledDpEvent(sampling_rate, step)
    return step if steps == 1 else dp_accounting.SelfComposedDpEvent(step, int(steps))
