"""DPED's privacy accounting: sensitivities, per-query Gaussian events, σ calibration, ledger spends.

Per query DPED releases up to three Gaussian mechanisms; their noise multipliers (σ / sensitivity)
are one calibrated multiplier z split by budget shares s (1/zᵢ² = sᵢ/z², so Σ 1/zᵢ² = 1/z² and the
composed per-query event equals one Gaussian of multiplier z under RDP and PLD alike):

- the Confident-GNMax threshold check on the top vote count (sensitivity 1);
- the GNMax vote histogram (L2 sensitivity √2: one teacher moves its vote from one bin to another);
- the mean of teacher hidden vectors clipped to norm C (sensitivity 2C/N: one teacher's vector can
  move from c to −c, and the mean divides by N).

Every query is charged for all three releases, answered or not (the number answered depends on the
private votes; charging the worst case keeps the count data-independent). The paper's noiseless
threshold (``faithful``) is not DP and is recorded as :class:`dpkit.accounting.NoGuarantee`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting

from dpkit.accounting import DpGuarantee, NoGuarantee, calibrate_noise

THRESHOLD_SENSITIVITY = 1.0
VOTES_SENSITIVITY = math.sqrt(2.0)

FAITHFUL_REASON = ("DPED's rare-word threshold compares the noiseless top vote count with r: "
                   "whether a query is answered reveals one teacher's vote exactly (paper §3.4)")


def hidden_sensitivity(clip: float, teachers: int) -> float:
    """L2 sensitivity of the mean of ``teachers`` vectors clipped to norm ``clip``: 2C/N."""
    return 2.0 * clip / teachers


@dataclass(frozen=True)
class NoisePlan:
    """Noise std of each per-query release; ``None`` means the release is absent (or noiseless)."""

    queries: int
    sigma_threshold: float | None
    sigma_votes: float
    sigma_hidden: float | None = None
    hidden_sens: float = 0.0
    faithful: bool = False

    def per_query_events(self) -> list[tuple[dp_accounting.DpEvent, str]]:
        """The Gaussian events of one query with labels, as noise multipliers σ/Δ."""
        out = []
        if self.sigma_threshold is not None:
            out.append((dp_accounting.GaussianDpEvent(self.sigma_threshold / THRESHOLD_SENSITIVITY),
                        "threshold check, noisy top count (Δ=1)"))
        out.append((dp_accounting.GaussianDpEvent(self.sigma_votes / VOTES_SENSITIVITY),
                    "GNMax vote histogram (Δ₂=√2)"))
        if self.sigma_hidden is not None:
            out.append((dp_accounting.GaussianDpEvent(self.sigma_hidden / self.hidden_sens),
                        f"mean of clipped teacher vectors (Δ₂=2C/N={self.hidden_sens:.4g})"))
        return out

    def spends(self) -> list[tuple[object, str, int]]:
        """(guarantee, label, count) for the ledger, grouped: count = number of queries."""
        out = [(DpGuarantee(ev), label, self.queries)
               for ev, label in self.per_query_events()]
        if self.faithful:
            out.insert(0, (NoGuarantee(FAITHFUL_REASON), "noiseless rare-word threshold (faithful)", 1))
        return out

    def total_event(self) -> dp_accounting.DpEvent:
        """All DP releases of the run as one event, grouped per release as the ledger groups them."""
        return dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(ev, self.queries)
                                              for ev, _ in self.per_query_events()])


def plan_noise(*, target_epsilon: float, delta: float, accountant: str, queries: int,
               shares: dict[str, float], noisy_threshold: bool, hidden_sens: float = 0.0) -> NoisePlan:
    """Calibrate σ of each release so that ``queries`` queries spend at most (target_epsilon, delta).

    ``shares`` maps ``threshold`` / ``votes`` / ``hidden`` to budget shares; components absent from
    the protocol (``hidden`` for PATE, ``threshold`` when faithful) are dropped and the rest
    renormalized.
    """
    active = {k: v for k, v in shares.items() if v > 0 and (k != "threshold" or noisy_threshold)}
    if "votes" not in active:
        raise ValueError(f"the vote histogram needs a positive budget share, got shares={shares}")
    total = sum(active.values())
    mult = {k: 1.0 / math.sqrt(v / total) for k, v in active.items()}

    def build(z: float) -> NoisePlan:
        return NoisePlan(
            queries=queries,
            sigma_threshold=z * mult["threshold"] * THRESHOLD_SENSITIVITY if "threshold" in mult else None,
            sigma_votes=z * mult["votes"] * VOTES_SENSITIVITY,
            sigma_hidden=z * mult["hidden"] * hidden_sens if "hidden" in mult else None,
            hidden_sens=hidden_sens, faithful=not noisy_threshold)

    z = calibrate_noise(lambda z: build(z).total_event(), target_epsilon, delta, accountant)
    return build(z)
