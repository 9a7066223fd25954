"""Pure functions over dp-accounting events: grouping, composition, ε(δ), δ(ε), RDP curves.

No hand-written RDP or PLD lives here: every number comes from dp-accounting's accountants.
Identical events are grouped into one ``SelfComposedDpEvent`` before composing, which turns
"200 distinct compositions" into one (PLD composition cost grows with each distinct event).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

import attr
import dp_accounting
import numpy as np

from dpkit.accounting.pure import NEIGHBORING, DpkitPLDAccountant, DpkitRdpAccountant
from dpkit.accounting.settings import (  # noqa: F401 (re-exported)
    ACCOUNTANTS,
    NEIGHBORINGS,
    PLD_DISCRETIZATION,
    check_accountant,
    check_discretization,
    check_neighboring,
)
from dpkit.base.errors import AccountingError

def make_accountant(name: str = "rdp", orders: Sequence[float] | None = None, *,
                    neighboring: str = "add_remove", discretization: float | None = None
                    ) -> dp_accounting.PrivacyAccountant:
    """A fresh accountant: RDP (optionally on custom orders) or PLD, under a neighbouring relation.

    Both also compose dpkit's :class:`~dpkit.accounting.pure.PureDpEvent` and (PLD only)
    :class:`~dpkit.accounting.pure.ApproxDpEvent`.
    """
    relation = NEIGHBORING[check_neighboring(neighboring)]
    if check_accountant(name) == "rdp":
        if discretization is not None:
            raise AccountingError("a PLD discretisation interval was given but the accountant is "
                                  "'rdp'; drop it or use accountant='pld'")
        return DpkitRdpAccountant(orders=list(orders) if orders is not None else None,
                                  neighboring_relation=relation)
    if orders is not None:
        raise AccountingError("RDP orders were given but the accountant is 'pld'; drop the orders "
                              "or use accountant='rdp'")
    return DpkitPLDAccountant(neighboring_relation=relation,
                              value_discretization_interval=check_discretization(discretization))


def _exact_form(value: object) -> Hashable:
    """A hashable form equal for equal values: every array element kept (never a printed form)."""
    if isinstance(value, dp_accounting.DpEvent):
        return event_key(value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_exact_form(v) for v in value))
    if isinstance(value, Mapping):
        return ("mapping", tuple(sorted((repr(k), _exact_form(v)) for k, v in value.items())))
    if isinstance(value, float) and math.isnan(value):
        return ("nan", id(value))  # NaN equals nothing, so never merges
    hash(value)
    return value


def event_key(event: dp_accounting.DpEvent) -> Hashable:
    """A key under which exactly the equal events group: the event, or its fields' exact form."""
    try:
        hash(event)
        return event
    except TypeError:  # ComposedDpEvent holds a list, MixtureOfGaussiansDpEvent arrays
        pass
    try:
        return (type(event), tuple(_exact_form(getattr(event, f.name))
                                   for f in attr.fields(type(event))))
    except TypeError:  # a field with no exact hashable form: never merge it with another spend
        return ("ungrouped", id(event))


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


def _why_unsupported(event: dp_accounting.DpEvent, name: str, neighboring: str,
                     orders: Sequence[float] | None) -> str | None:
    """None if accountant ``name`` composes ``event`` under ``neighboring``, else its reason."""
    acct = make_accountant(name, orders if name == "rdp" else None, neighboring=neighboring)
    details = acct._maybe_compose(event, 1, False)  # dp-accounting's own dry run, with a reason
    if details is None:
        return None
    return f"{details.error_message} (at {details.invalid_event!r})"


def supports(event: dp_accounting.DpEvent, accountant: str = "rdp",
             neighboring: str = "add_remove") -> bool:
    """True if the named accountant composes ``event`` under ``neighboring``."""
    return _why_unsupported(event, check_accountant(accountant), neighboring, None) is None


def check_supported(event: dp_accounting.DpEvent, accountant: str = "rdp",
                    orders: Sequence[float] | None = None, neighboring: str = "add_remove",
                    what: str = "") -> None:
    """Raise a clear AccountingError unless ``accountant`` composes ``event`` under ``neighboring``."""
    check_accountant(accountant)
    reason = _why_unsupported(event, accountant, neighboring, orders)
    if reason is None:
        return
    other = "pld" if accountant == "rdp" else "rdp"
    other_reason = _why_unsupported(event, other, neighboring, None)
    head = f"{what}: " if what else ""
    tried = (f"{head}the {accountant.upper()} accountant ({neighboring} neighbours) cannot compose "
             f"{event!r}: {reason}")
    if other_reason is None:
        raise AccountingError(f"{tried}; the {other.upper()} accountant can: use "
                              f"accountant={other!r}")
    others = [n for n in NEIGHBORINGS if n != neighboring]
    raise AccountingError(
        f"{tried}; the {other.upper()} accountant cannot either: {other_reason}. Describe the "
        f"mechanism with an event both support (e.g. DpGuarantee.pure(ε) for any ε-DP "
        f"mechanism), state it under the other neighbouring relation ({', '.join(others)}), or "
        "record NoGuarantee with a reason")


def composed_accountant(event: dp_accounting.DpEvent, accountant: str = "rdp",
                        orders: Sequence[float] | None = None, *, neighboring: str = "add_remove",
                        discretization: float | None = None) -> dp_accounting.PrivacyAccountant:
    """An accountant with ``event`` composed into it; query it for any number of ε(δ) / δ(ε)."""
    check_supported(event, accountant, orders, neighboring)
    acct = make_accountant(accountant, orders, neighboring=neighboring,
                           discretization=discretization)
    return acct.compose(event)


def epsilon_of(event: dp_accounting.DpEvent, delta: float, accountant: str = "rdp",
               orders: Sequence[float] | None = None, *, neighboring: str = "add_remove",
               discretization: float | None = None) -> float:
    """ε of ``event`` at ``delta`` with the named dp-accounting accountant."""
    if not 0 <= delta < 1:
        raise AccountingError(f"delta must lie in [0, 1), got {delta!r}")
    acct = composed_accountant(event, accountant, orders, neighboring=neighboring,
                               discretization=discretization)
    return float(acct.get_epsilon(delta))


def delta_of(event: dp_accounting.DpEvent, epsilon: float, accountant: str = "rdp",
             orders: Sequence[float] | None = None, *, neighboring: str = "add_remove",
             discretization: float | None = None) -> float:
    """δ of ``event`` at ``epsilon`` with the named dp-accounting accountant."""
    if not epsilon >= 0:
        raise AccountingError(f"epsilon must be ≥ 0, got {epsilon!r}")
    acct = composed_accountant(event, accountant, orders, neighboring=neighboring,
                               discretization=discretization)
    return float(acct.get_delta(epsilon))


def rdp_curve(event: dp_accounting.DpEvent, orders: Sequence[float],
              neighboring: str = "add_remove") -> list[float]:
    """Rényi-DP ε(α) of ``event`` at each order α (dp-accounting's RDP accountant)."""
    acct = composed_accountant(event, "rdp", orders, neighboring=neighboring)
    return [float(v) for v in acct.rdp]


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
