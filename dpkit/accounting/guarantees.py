"""Privacy guarantees as data: what a mechanism promises, declared before it runs.

Four kinds, one per notion the ledger composes:

- :class:`DpGuarantee` — (ε, δ)-DP described by a dp-accounting ``DpEvent``;
- :class:`MetricDpGuarantee` — η-dχ metric DP for a named metric on a named embedding space;
- :class:`KAnonymityGuarantee` — (k, ε)-anonymity with the *achieved* k;
- :class:`NoGuarantee` — no valid guarantee; reported as ε = ∞ with its reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import dp_accounting


@dataclass(frozen=True)
class DpGuarantee:
    """(ε, δ)-DP of one release, as a dp-accounting event (e.g. ``GaussianDpEvent(σ)``)."""

    event: dp_accounting.DpEvent
    description: str = ""

    notion = "dp"

    @classmethod
    def pure(cls, epsilon: float, description: str = "",
             neighboring: str | None = None) -> DpGuarantee:
        """ε-DP of one release (any ε-DP mechanism), stated under ``neighboring`` (None: the ledger's)."""
        from dpkit.accounting.pure import PureDpEvent

        _check_epsilon(epsilon)
        return cls(PureDpEvent(float(epsilon), neighboring), description)

    @classmethod
    def approximate(cls, epsilon: float, delta: float, description: str = "",
                    neighboring: str | None = None) -> DpGuarantee:
        """(ε, δ)-DP of one release, composed as its worst case (PLD accountant only when δ > 0)."""
        from dpkit.accounting.pure import ApproxDpEvent

        _check_epsilon(epsilon)
        if not 0 <= delta < 1:
            raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
        return cls(ApproxDpEvent(float(epsilon), float(delta), neighboring), description)


def _check_epsilon(epsilon: float) -> None:
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a finite number ≥ 0, got {epsilon!r}; an unbounded "
                         "release is NoGuarantee(reason)")


METRIC_UNITS = ("token", "sequence")


@dataclass(frozen=True)
class MetricDpGuarantee:
    """η-dχ privacy: for any x, x' and output set S, P[M(x)∈S] ≤ exp(η·d(x, x'))·P[M(x')∈S].

    ``metric`` names d (``"l2"``), ``space`` the embedding table it is measured in, and ``unit``
    what one application covers (``"token"``: one token, so a document of n tokens gets
    η·Σᵢ d(xᵢ, x'ᵢ); ``"sequence"``: one whole document at once, with the same Σᵢ d(xᵢ, x'ᵢ)
    distance between two documents of equal length).
    """

    eta: float
    metric: str = "l2"
    space: str = ""
    unit: str = "token"

    notion = "metric_dp"

    def __post_init__(self) -> None:
        if not (self.eta > 0 and math.isfinite(self.eta)):
            raise ValueError(f"metric-DP eta must be a positive finite number, got {self.eta!r}")
        if self.unit not in METRIC_UNITS:
            raise ValueError(f"metric-DP unit must be one of {METRIC_UNITS}, got {self.unit!r}: "
                             "'token' covers one token per application, 'sequence' one document")

    def epsilon_at(self, distance: float) -> float:
        """The ε this guarantee gives two inputs at ``distance``: η·d."""
        if distance < 0:
            raise ValueError(f"distance must be non-negative, got {distance!r}")
        return self.eta * distance


@dataclass(frozen=True)
class KAnonymityGuarantee:
    """(k, ε)-anonymity: each token hides among ≥ k others, weights released with ε-DP.

    ``k_achieved`` is the smallest anonymity set actually produced, ``share_below_k`` the share
    of the vocabulary in sets smaller than ``k_requested``. k has no composition theorem.
    """

    k_requested: int
    k_achieved: int
    share_below_k: float
    epsilon: float

    notion = "k_anonymity"

    def __post_init__(self) -> None:
        if self.k_requested < 1 or self.k_achieved < 1:
            raise ValueError(f"k must be ≥ 1, got requested={self.k_requested}, "
                             f"achieved={self.k_achieved}")
        if not 0.0 <= self.share_below_k <= 1.0:
            raise ValueError(f"share_below_k must lie in [0, 1], got {self.share_below_k!r}")
        if not self.epsilon >= 0:
            raise ValueError(f"epsilon must be ≥ 0, got {self.epsilon!r}")


@dataclass(frozen=True)
class NoGuarantee:
    """No valid privacy guarantee; the ledger reports ε = ∞ and keeps the reason."""

    reason: str

    notion = "none"
    epsilon = math.inf

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("NoGuarantee needs a reason saying why no guarantee holds")


Guarantee = Union[DpGuarantee, MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee]
