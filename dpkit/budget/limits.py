"""Setting a dataset's cap: what a new cap governs, what it would loosen, what is already spent.

A cap is fixed before the runs it governs — the privacy filter's guarantee assumes so — so a
change that loosens it (a larger ε, δ, η or (k, ε) ε, or another relation) is refused unless it
is an explicit raise with a reason, recorded in the history with who and when; lifting a cap is
its own recorded act (:meth:`dpkit.budget.store.BudgetStore.lift_cap`). Tightening is always
allowed. A cap set over earlier charges is set, with a warning naming what they already spent.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.base.errors import BudgetStoreError
from dpkit.budget.caps import totals
from dpkit.budget.fingerprint import DatasetId
from dpkit.budget.relations import RELATIONS
from dpkit.budget.state import Cap, State

LIMITS = ("epsilon", "eta", "anonymity_epsilon")


def _checked(epsilon: float | None, delta: float | None, eta: float | None,
             anonymity_epsilon: float | None, relation: str) -> None:
    if relation not in RELATIONS:
        raise BudgetStoreError(f"unknown relation {relation!r}; use one of {', '.join(RELATIONS)}")
    if epsilon is None and eta is None and anonymity_epsilon is None:
        raise BudgetStoreError("a cap needs at least one of --epsilon (with --delta), --eta, "
                               "--anonymity-epsilon")
    if (epsilon is None) != (delta is None):
        raise BudgetStoreError("an (ε, δ) cap needs both --epsilon and --delta")
    for name, value in (("ε", epsilon), ("η", eta), ("(k, ε) ε", anonymity_epsilon)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise BudgetStoreError(f"a cap's {name} must be a positive finite number, got {value}")
    if delta is not None and not 0 < delta < 1:
        raise BudgetStoreError(f"a cap's δ must lie in (0, 1), got {delta}")


def cap_change(state: State, dataset: DatasetId, relation: str, epsilon: float | None,
               delta: float | None, eta: float | None, anonymity_epsilon: float | None,
               raise_cap: bool, reason: str, who: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The log body of a cap change and what to tell the user (governs, warnings)."""
    _checked(epsilon, delta, eta, anonymity_epsilon, relation)
    old = state.caps.get(dataset.fingerprint)
    new = Cap(relation, epsilon, delta, eta, anonymity_epsilon)
    if old is not None:  # notions not named keep their cap
        new.epsilon = old.epsilon if epsilon is None else epsilon
        new.delta = old.delta if delta is None else delta
        new.relation = old.relation if epsilon is None and old.epsilon is not None else relation
        new.eta = old.eta if eta is None else eta
        new.anonymity_epsilon = (old.anonymity_epsilon if anonymity_epsilon is None
                                 else anonymity_epsilon)
    looser = _loosened(old, new)
    if looser and not raise_cap:
        raise BudgetStoreError(f"not capping {dataset.short}: this would loosen its cap ({looser}). "
                               "A privacy filter is valid only for a cap fixed before the runs it "
                               "governs; raising one is an explicit act: pass --raise with "
                               "--reason, and it is recorded in the store's history")
    if looser and not reason.strip():
        raise BudgetStoreError("raising a cap needs a --reason, kept in the store's history")
    act = "raise" if looser else ("set" if old is None else "lower")
    body = {"id": dataset.fingerprint, "act": act, "relation": new.relation,
            "epsilon": new.epsilon, "delta": new.delta, "eta": new.eta,
            "anonymity_epsilon": new.anonymity_epsilon, "reason": reason, "by": who}
    return body, {"act": act, "governs": new.governs(), "warnings": _warnings(state, dataset, new),
                  "loosened": looser}


def _loosened(old: Cap | None, new: Cap) -> str:
    if old is None:
        return ""
    parts = []
    for name in LIMITS:
        before, after = getattr(old, name), getattr(new, name)
        if before is not None and (after is None or after > before):
            parts.append(f"{name} {before:g} → {after if after is None else format(after, 'g')}")
    if old.delta is not None and new.delta is not None and new.delta > old.delta:
        parts.append(f"δ {old.delta:g} → {new.delta:g}")
    if old.epsilon is not None and new.relation != old.relation:
        parts.append(f"relation {old.relation} → {new.relation}")
    return ", ".join(parts)


def _warnings(state: State, dataset: DatasetId, cap: Cap) -> list[str]:
    fp = dataset.fingerprint
    past = [(c.relation, s) for _, _, c in state.cells_reading(fp) for s in c.counted()]
    if not past:
        return []
    out = [f"{len(past)} spend(s) of earlier runs already read these records: the filter's "
           "guarantee assumes the cap came first, so they are counted in full"]
    try:
        spent = totals(cap, past)
    except Exception as exc:  # noqa: BLE001 - say why, the admission will refuse the same way
        return out + [f"earlier spends cannot be counted against this cap ({exc}): every run on "
                      "these records will be refused"]
    for name, symbol in (("epsilon", "ε"), ("eta", "η per token"), ("anonymity_epsilon", "(k, ε) ε")):
        limit = getattr(cap, name)
        if limit is not None and spent[name] > limit:
            out.append(f"the cap is already spent: {symbol} = {spent[name]:.6g} > {limit:g}; every "
                       "further run on these records will be refused")
    return out
