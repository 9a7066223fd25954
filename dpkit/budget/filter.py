"""A privacy filter: the rule that admits a run on a capped dataset, valid when each run is chosen
after seeing the results of the earlier ones.

Composition theorems assume the sequence of mechanisms is fixed in advance. When the next run
depends on earlier results (its ε, its data, whether it happens at all), the sound tool is a
filter (Rogers, Roth, Ullman and Vadhan, "Privacy Odometers and Filters: Pay-as-you-Go
Composition", NeurIPS 2016): a budget (ε_cap, δ_cap) fixed before the first run, and a rule that
refuses any run after which the rule's bound would pass it. dpkit's rule, for a dataset whose
spends are ρ₁(α), ρ₂(α), … (Rényi DP of each run, dp-accounting's RDP accountant, on the fixed
grid ``FILTER_ORDERS`` of m orders):

    admit iff  min over α in the grid of  Σᵢ ρᵢ(α) + log(m / δ_cap) / (α − 1)  ≤ ε_cap,
    or, when every spend is pure ε-DP,   Σᵢ εᵢ ≤ ε_cap.

Why it holds: at each order α, exp((α − 1)(Lₜ − Σᵢ≤ₜ ρᵢ(α))) is a non-negative supermartingale
in the privacy loss Lₜ even when ρᵢ is chosen after the earlier outputs (the Rényi filter of
Whitehouse, Ramdas, Rogers and Wu, "Fully-Adaptive Composition in Differential Privacy", ICML
2023; Feldman and Zrnic, NeurIPS 2021), so by Markov's inequality P[L > ε_cap and order α
certifies] ≤ δ_cap / m; some order certifies every admitted sequence, and a union over the m
orders gives P[L > ε_cap] ≤ δ_cap. The log m and the plain Markov conversion make the filter's ε
a little above the non-adaptive composed ε that ``dpkit budget status`` also prints. Pure spends
have |Lᵢ| ≤ εᵢ surely, which is basic composition as a filter (Rogers et al., Theorem 3.6).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from dpkit.accounting import DpGuarantee, Guarantee
from dpkit.base.errors import AccountingError

FILTER_ORDERS: tuple[float, ...] = (tuple(round(1 + i / 10, 1) for i in range(1, 100))
                                    + tuple(float(a) for a in range(11, 64))
                                    + (128.0, 256.0, 512.0, 1024.0))
"""The filter's Rényi orders, fixed in advance (dp-accounting's default grid, m = 156)."""


def _dp_spends(spends: Iterable[tuple[Guarantee, int]]) -> list[tuple[DpGuarantee, int]]:
    out = []
    for g, count in spends:
        if not isinstance(g, DpGuarantee):
            raise AccountingError(f"a {g.notion} spend ({g!r}) has no (ε, δ) bound, so it cannot "
                                  "be counted against an (ε, δ) cap; refusing rather than leaving "
                                  "it uncounted")
        out.append((g, count))
    return out


def filter_epsilon(spends: Iterable[tuple[Guarantee, int]], delta: float,
                   neighboring: str = "add_remove") -> float:
    """The filter's ε at ``delta`` for ``spends`` ((guarantee, count) pairs, in any order)."""
    return filter_epsilon_by_relation({neighboring: list(spends)}, delta, neighboring)


def filter_epsilon_by_relation(spends: Mapping[str, Iterable[tuple[Guarantee, int]]],
                               delta: float, cap_relation: str) -> float:
    """The filter's ε at ``delta`` under ``cap_relation`` for spends keyed by the relation they are
    stated in, each converted by :mod:`dpkit.budget.relations` (or refused there, naming why)."""
    from dpkit.accounting import composed_event, group_events  # dp-accounting, on first use
    from dpkit.accounting.bounds import split_stated
    from dpkit.budget.relations import pure_factor, relation_curve

    if not 0 < delta < 1:
        raise AccountingError(f"a filter's δ must lie in (0, 1), got {delta!r}")
    orders = np.asarray(FILTER_ORDERS)
    curve, pure, seen = np.zeros(len(orders)), 0.0, False
    for relation, pairs in spends.items():
        groups = group_events([(g.event, n) for g, n in _dp_spends(pairs)])
        if not groups:
            continue
        seen = True
        factor = pure_factor(relation, cap_relation)  # raises, naming why, with no conversion
        split = split_stated(groups, relation)
        pure += factor * split.epsilon if not split.rest and split.delta == 0 else math.inf
        try:
            curve = curve + relation_curve(composed_event(groups), FILTER_ORDERS, relation,
                                           cap_relation)
        except AccountingError:
            curve = curve + math.inf  # no Rényi curve (e.g. (ε, δ) with δ > 0): only pure can admit
    if not seen:
        return 0.0
    with np.errstate(invalid="ignore"):
        rdp = float(np.nanmin(curve + math.log(len(orders) / delta) / (orders - 1)))
    return min(rdp, pure)
