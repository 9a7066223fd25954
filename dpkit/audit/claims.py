"""What a declared guarantee claims for one input pair: ε as a function of the pair's distance."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpkit.accounting.guarantees import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.pure import ApproxDpEvent, PureDpEvent
from dpkit.base.errors import AuditError

PURE_EVENTS = (PureDpEvent, ApproxDpEvent)


def dp_epsilon(guarantee: DpGuarantee, delta: float, accountant: str = "rdp") -> float:
    """ε of one release of ``guarantee`` at ``delta``, as the privacy ledger reports it.

    Add/remove first (the ledger's default); an event stated only for replace-one neighbours
    (randomized response) is read under replace-one, the relation of the auditor's pairs.
    """
    from dpkit.accounting import Ledger, supports

    relation = "add_remove" if supports(guarantee.event, accountant) else "replace_one"
    ledger = Ledger(delta=delta, accountant=accountant, neighboring=relation)
    ledger.spend(guarantee, label="audit")
    return float(ledger.epsilon())


@dataclass(frozen=True)
class Claim:
    """A guarantee turned into a testable bound: ε(d) = eta·d (metric DP) or a constant ε.

    ``kind`` is ``"metric"``, ``"dp"``, ``"k_anonymity"`` or ``"none"``; ``delta`` the δ the bound
    holds at (0 for pure claims); ``unit`` what one application covers (``"token"``, ``"window"``,
    ...); ``neighbours`` says which input pairs the bound covers.
    """

    kind: str
    epsilon: float
    delta: float
    eta: float = 0.0
    unit: str = "token"
    description: str = ""
    k_requested: int = 0
    k_achieved: int = 0
    share_below_k: float = 0.0

    @classmethod
    def from_guarantee(cls, guarantee: object, delta: float, accountant: str = "rdp") -> Claim:
        """The claim of ``guarantee``; (ε, δ)-DP is evaluated with the ledger at ``delta``."""
        if isinstance(guarantee, MetricDpGuarantee):
            if guarantee.metric != "l2":
                raise AuditError(f"metric-DP guarantee over metric {guarantee.metric!r} cannot be "
                                 "audited; the auditor measures L2 distances (metric 'l2')")
            return cls("metric", math.nan, 0.0, eta=guarantee.eta, unit=guarantee.unit,
                       description=f"{guarantee.eta:g}-dχ (L2, per {guarantee.unit})")
        if isinstance(guarantee, DpGuarantee) and isinstance(guarantee.event, PURE_EVENTS):
            event = guarantee.event  # the auditor's pairs replace one input: add/remove costs 2ε
            eps = event.epsilon * (2 if event.neighboring == "add_remove" else 1)
            at = getattr(event, "delta", 0.0)
            return cls("dp", eps, at, description=f"({eps:.4g}, {at:g})-DP (declared)")
        if isinstance(guarantee, DpGuarantee):
            eps = dp_epsilon(guarantee, delta, accountant)
            return cls("dp", eps, delta, description=f"({eps:.4g}, {delta:g})-DP "
                       f"({type(guarantee.event).__name__})")
        if isinstance(guarantee, KAnonymityGuarantee):
            return cls("k_anonymity", guarantee.epsilon, 0.0,
                       description=f"(k={guarantee.k_achieved}, ε={guarantee.epsilon:g})-anonymity",
                       k_requested=guarantee.k_requested, k_achieved=guarantee.k_achieved,
                       share_below_k=guarantee.share_below_k)
        if isinstance(guarantee, NoGuarantee):
            return cls("none", math.inf, 0.0,
                       description=f"no guarantee (ε = ∞): {guarantee.reason}")
        raise AuditError(f"mechanism declared {guarantee!r}, which is not a dpkit guarantee; "
                         "return one of dpkit.accounting's guarantee classes from guarantee()")

    def epsilon_at(self, distance: float) -> float:
        """The ε this claim allows between two inputs at L2 ``distance``."""
        if self.kind == "metric":
            return self.eta * distance
        return self.epsilon

    def distance_for(self, epsilon: float) -> float:
        """The distance at which a metric claim allows ``epsilon`` (metric claims only)."""
        if self.kind != "metric":
            raise AuditError(f"distance_for applies to metric-DP claims, not {self.kind!r}")
        return epsilon / self.eta
