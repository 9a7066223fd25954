"""A budget ceiling: refuses a spend *before* it is recorded when it would exceed the budget.

The ceiling compares numbers it is given (:class:`Usage`); the ledger computes them, so this
module knows nothing of the ledger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import NamedTuple

from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
)
from dpkit.base.errors import AccountingError, BudgetExceededError

REL_TOL = 1e-9
"""A total within this relative distance of the ceiling counts as on it (absorbs float rounding)."""


CAP_SYMBOLS = {"epsilon": "ε", "eta": "η", "anonymity_epsilon": "(k, ε) ε"}
"""Each cap's name and the symbol its messages use."""


def _within(total: float, cap: float) -> bool:
    return total <= cap * (1.0 + REL_TOL)


class Usage(NamedTuple):
    """One capped total before and after a proposed spend, and how the refusal states the change."""

    cap: str
    before: float
    after: float
    change: str


@dataclass(frozen=True)
class Ceiling:
    """Caps on (ε, δ)-DP ε (at the ledger's δ), on η per metric, on the (k, ε) ε; None = uncapped."""

    epsilon: float | None = None
    eta: float | None = None
    anonymity_epsilon: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and not (value >= 0 and not math.isnan(value)):
                raise AccountingError(f"ceiling {name} must be ≥ 0, got {value!r}")

    @classmethod
    def coerce(cls, value: float | Mapping[str, float] | Ceiling | None) -> Ceiling | None:
        """A float caps both ε's; a mapping names its caps; None means no ceiling."""
        if value is None or isinstance(value, Ceiling):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"epsilon", "eta", "anonymity_epsilon"}
            if unknown:
                raise AccountingError(f"unknown ceiling keys {sorted(unknown)}; use epsilon, eta, "
                                      "anonymity_epsilon")
            return cls(**{k: (None if v is None else float(v)) for k, v in value.items()})
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(epsilon=float(value), anonymity_epsilon=float(value))
        raise AccountingError(f"ceiling must be a number, a mapping or None, got {value!r}")

    def to_dict(self) -> dict[str, float | None]:
        """The caps as a plain dict (round-trips through :meth:`coerce`)."""
        return asdict(self)

    def governs(self, g: Guarantee) -> str | None:
        """The name of the cap a spend of ``g`` counts against, or None when it is uncapped."""
        if isinstance(g, DpGuarantee):
            return "epsilon" if self.epsilon is not None else None
        if isinstance(g, MetricDpGuarantee):
            return "eta" if self.eta is not None else None
        if isinstance(g, KAnonymityGuarantee):
            return "anonymity_epsilon" if self.anonymity_epsilon is not None else None
        return None

    def refuse_unbounded(self, asked: str) -> None:
        """Raise BudgetExceededError for a spend with no valid guarantee (its ε is ∞)."""
        raise BudgetExceededError(f"{asked} has no valid guarantee, so ε = ∞; a ledger with a "
                                  f"ceiling ({self._caps()}) refuses it; nothing was recorded")

    def check(self, asked: str, usage: Usage) -> None:
        """Raise BudgetExceededError if ``usage.after`` goes over the cap ``usage`` counts against."""
        cap, what = getattr(self, usage.cap), CAP_SYMBOLS[usage.cap]
        if cap is not None and not _within(usage.after, cap):
            left = max(cap - usage.before, 0.0)
            raise BudgetExceededError(f"{asked} {usage.change}, above the ceiling {what} = {cap:g}; "
                                      f"remaining {what} = {left:.6g}; nothing was recorded")

    def remaining(self, used: Mapping[str, float]) -> dict[str, float]:
        """Budget left per cap given what is ``used`` (∞ where uncapped, never below 0)."""
        caps = self.to_dict()
        return {key: (math.inf if caps[key] is None else max(caps[key] - used[key], 0.0))
                for key in CAP_SYMBOLS}

    def _caps(self) -> str:
        return ", ".join(f"{k} ≤ {v:g}" for k, v in self.to_dict().items() if v is not None)
