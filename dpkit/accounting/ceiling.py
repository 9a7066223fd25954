"""A budget ceiling: refuses a spend *before* it is recorded when it would exceed the budget."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.rules import metric_key
from dpkit.accounting.serialize import describe
from dpkit.base.errors import AccountingError, BudgetExceededError

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Ledger

REL_TOL = 1e-9
"""A total within this relative distance of the ceiling counts as on it (absorbs float rounding)."""


def _within(total: float, cap: float) -> bool:
    return total <= cap * (1.0 + REL_TOL)


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

    def check(self, ledger: Ledger, g: Guarantee, label: str, count: int) -> None:
        """Raise BudgetExceededError if recording ``count`` × ``g`` would exceed a cap."""
        asked = f"spend {label!r} ({describe(g)}, ×{count})"
        if isinstance(g, NoGuarantee):
            raise BudgetExceededError(f"{asked} has no valid guarantee, so ε = ∞; a ledger with a "
                                      f"ceiling ({self._caps()}) refuses it; nothing was recorded")
        if isinstance(g, DpGuarantee) and self.epsilon is not None:
            acct = ledger.composed_accountant((g, count))
            after = float(acct.get_epsilon(ledger.delta_target))
            self._refuse_if(after, self.epsilon, ledger.epsilon(), "ε",
                            f"{asked} would bring ε to {after:.6g} at δ={ledger.delta_target:g}")
        elif isinstance(g, MetricDpGuarantee) and self.eta is not None:
            now = ledger.eta_totals().get(metric_key(g), 0.0)
            after = math.fsum([now, g.eta * count])
            self._refuse_if(after, self.eta, now, "η",
                            f"{asked} would bring η ({g.metric}, {g.space or 'any space'}) to "
                            f"{after:.6g}")
        elif isinstance(g, KAnonymityGuarantee) and self.anonymity_epsilon is not None:
            k = ledger.k_anonymity()
            now = k.epsilon if k is not None else 0.0
            after = math.fsum([now, g.epsilon * count])
            self._refuse_if(after, self.anonymity_epsilon, now, "(k, ε) ε",
                            f"{asked} would bring the anonymity ε to {after:.6g}")

    @staticmethod
    def _refuse_if(after: float, cap: float, now: float, what: str, asked: str) -> None:
        if not _within(after, cap):
            left = max(cap - now, 0.0)
            raise BudgetExceededError(f"{asked}, above the ceiling {what} = {cap:g}; remaining "
                                      f"{what} = {left:.6g}; nothing was recorded")

    def remaining(self, ledger: Ledger) -> dict[str, float]:
        """Budget left per cap (∞ where uncapped, never below 0)."""
        etas = ledger.eta_totals().values()
        k = ledger.k_anonymity()
        used = {"epsilon": ledger.epsilon(), "eta": max(etas, default=0.0),
                "anonymity_epsilon": k.epsilon if k is not None else 0.0}
        caps = self.to_dict()
        return {key: (math.inf if caps[key] is None else max(caps[key] - used[key], 0.0))
                for key in used}

    def _caps(self) -> str:
        return ", ".join(f"{k} ≤ {v:g}" for k, v in self.to_dict().items() if v is not None)
