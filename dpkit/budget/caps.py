"""Whether spends may be charged: every capped dataset sharing a record with the data is checked,
for every notion the ledger keeps.

A cap on a dataset counts every cell of every run whose dataset shares a record with it (a copy,
a subset, a catalogue alias), each converted into the cap's relation (:mod:`dpkit.budget.relations`).
Per notion: (ε, δ)-DP through the privacy filter (:mod:`dpkit.budget.filter`); metric DP as η per
token summed over every pass, metric, space and unit (a change of space cannot start a fresh
budget); (k, ε)-anonymity as summed ε. A spend of a notion the cap does not govern, or with no
bound at all (:class:`~dpkit.accounting.NoGuarantee`), is refused on a capped dataset: it could
not be counted, and an uncounted spend would pass the cap unseen.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting import guarantee_from_dict
from dpkit.accounting.guarantees import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.base.errors import BudgetExceededError
from dpkit.budget.filter import filter_epsilon_by_relation
from dpkit.budget.fingerprint import short_name
from dpkit.budget.state import Cap, State

CAP_TOLERANCE = 1e-9
NOTIONS = {DpGuarantee: "epsilon", MetricDpGuarantee: "eta", KAnonymityGuarantee: "anonymity_epsilon"}
HOW_TO_CAP = {"epsilon": "--epsilon E --delta D", "eta": "--eta H",
              "anonymity_epsilon": "--anonymity-epsilon E"}


def totals(cap: Cap, spends: list[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    """Each capped notion's total for ``spends`` ((relation, spend record) pairs)."""
    by_relation: dict[str, list] = {}
    eta = anonymity = 0.0
    for relation, record in spends:
        g, n = guarantee_from_dict(record["guarantee"]), int(record["count"])
        if isinstance(g, (DpGuarantee, NoGuarantee)):
            by_relation.setdefault(relation, []).append((g, n))
        elif isinstance(g, MetricDpGuarantee):
            eta += g.eta  # one spend is one pass: each token (or document) released once
        elif isinstance(g, KAnonymityGuarantee):
            anonymity += g.epsilon * n
    out = {"eta": eta, "anonymity_epsilon": anonymity}
    if cap.epsilon is not None and by_relation:
        if any(isinstance(g, NoGuarantee) for pairs in by_relation.values() for g, _ in pairs):
            out["epsilon"] = math.inf
        else:
            out["epsilon"] = filter_epsilon_by_relation(by_relation, float(cap.delta or 0),
                                                        cap.relation)
    else:
        out["epsilon"] = 0.0 if not by_relation else math.inf
    return out


def admit(state: State, new: list[tuple[str, str, dict[str, Any]]], where: str,
          what: str = "this run's planned spends") -> None:
    """Raise :class:`BudgetExceededError` unless ``new`` ((dataset, relation, spend) triples) fits
    every cap of every dataset sharing a record with theirs."""
    touched = {fp for ds, _, _ in new for fp in state.linked(ds) if fp in state.caps}
    for fp in sorted(touched):
        cap, meta = state.caps[fp], state.datasets[fp]
        near = set(state.linked(fp))
        mine = [(rel, s) for ds, rel, s in new if ds in near]
        if not mine:
            continue
        label = short_name(meta["name"], fp)  # as dpkit budget status names it
        _notions_governed(cap, mine, label, meta["name"])
        past = [(c.relation, s) for _, _, c in state.cells_reading(fp) for s in c.counted()]
        try:
            before, after = totals(cap, past), totals(cap, past + mine)
        except Exception as exc:  # noqa: BLE001 - anything that cannot be bounded is refused
            raise BudgetExceededError(f"{label} is capped ({'; '.join(cap.governs())}), and "
                                      f"{what} cannot be counted against it: {exc}; nothing was "
                                      f"released") from None
        for notion, limit in (("epsilon", cap.epsilon), ("eta", cap.eta),
                              ("anonymity_epsilon", cap.anonymity_epsilon)):
            if limit is None or after[notion] <= limit * (1 + CAP_TOLERANCE):
                continue
            symbol = {"epsilon": "ε", "eta": "η per token", "anonymity_epsilon": "(k, ε) ε"}[notion]
            at = f" at δ = {cap.delta:g} ({cap.relation})" if notion == "epsilon" else ""
            raise BudgetExceededError(
                f"{label} is capped at {symbol} = {limit:g}{at}; the runs reading its records "
                f"so far have spent {symbol} = {before[notion]:.6g}"
                f"{' (privacy filter)' if notion == 'epsilon' else ''} and {what} would bring it "
                f"to {after[notion]:.6g}; remaining {symbol} = {max(limit - before[notion], 0):.6g}"
                f"; nothing was released (dpkit budget status {meta['name']} shows every charge; "
                f"store {where})")


def _notions_governed(cap: Cap, mine: list[tuple[str, dict[str, Any]]], label: str,
                      name: str) -> None:
    for _, record in mine:
        g = guarantee_from_dict(record["guarantee"])
        if isinstance(g, NoGuarantee):
            raise BudgetExceededError(f"{label} is capped, and a spend with no guarantee (ε = ∞: "
                                      f"{g.reason}) would pass any cap; nothing was released")
        notion = NOTIONS.get(type(g))
        if notion is not None and getattr(cap, notion) is None:
            raise BudgetExceededError(
                f"{label} is capped ({'; '.join(cap.governs())}), but not for {g.notion} spends "
                f"like {record['label']!r}, which that cap cannot count; add one with dpkit "
                f"budget cap {name} {HOW_TO_CAP[notion]}; nothing was released")
