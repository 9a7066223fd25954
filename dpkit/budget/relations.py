"""Charging a spend stated under one neighbouring relation to a cap stated under another.

One dataset has one cap, whatever relation a spec states its guarantees in; a spend is either
converted into the cap's relation by a valid theorem or refused with the reason.

- **add/remove → replace-one** (valid). Replacing a record is removing it and adding another, so
  replace-one neighbours D, D″ have a common add/remove neighbour D′ (D minus the record). For
  pure DP, group privacy over the two steps gives ε ⇒ 2ε. For Rényi DP, the weak triangle
  inequality of the Rényi divergence (Mironov, "Rényi Differential Privacy", IEEE CSF 2017,
  Proposition 11, with p = q = 2), D_α(P‖R) ≤ (α − ½)/(α − 1)·D_{2α}(P‖Q) + D_{2α−1}(Q‖R),
  applied to P = M(D), Q = M(D′), R = M(D″), turns an add/remove RDP curve ρ into the
  replace-one curve ρ′(α) = (α − ½)/(α − 1)·ρ(2α) + ρ(2α − 1). For a Gaussian this is within a
  factor (2α − 1/2)/(2α − 2) of the exact replace-one curve (tests/budget/test_relations.py).
- **replace-one → add/remove** (no valid conversion). A replace-one guarantee says nothing about
  adding or removing a record: releasing the exact number of records is 0-DP under replace-one
  and has no finite ε under add/remove. Such a spend is refused on an add/remove cap.
- ``replace_special`` converts to nothing and from nothing but itself.

Metric DP (dχ) and (k, ε)-anonymity are stated per pair of tokens and do not depend on the
dataset relation: they are charged as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpkit.accounting import rdp_curve
from dpkit.base.errors import AccountingError

RELATIONS = ("add_remove", "replace_one", "replace_special")
NO_CONVERSION = {
    ("replace_one", "add_remove"): "a replace-one guarantee says nothing about adding or removing "
    "a record (the exact record count is 0-DP under replace-one and ∞ under add/remove)",
}


def conversion_refusal(stated: str, cap: str) -> str | None:
    """Why a spend stated under ``stated`` cannot be charged to a cap under ``cap`` (None: it can)."""
    if stated == cap or (stated, cap) == ("add_remove", "replace_one"):
        return None
    reason = NO_CONVERSION.get((stated, cap), f"dpkit knows no valid conversion from {stated} to "
                                               f"{cap} neighbours")
    return (f"its spends are stated for {stated} neighbours and the cap for {cap}: {reason}; state "
            f"the spec's privacy in {cap} (privacy: {{neighboring: {cap}}}) or cap the dataset "
            f"in {stated}")


def pure_factor(stated: str, cap: str) -> float:
    """The factor on a pure ε stated under ``stated`` to bound it under ``cap`` (group privacy)."""
    _check(stated, cap)
    return 1.0 if stated == cap else 2.0


def relation_curve(event, orders: Sequence[float], stated: str, cap: str) -> np.ndarray:
    """Rényi-DP curve of ``event`` (stated under ``stated``) under ``cap``, at each order.

    Orders the conversion does not cover are ∞ (the filter takes the best order).
    """
    _check(stated, cap)
    alphas = np.asarray(orders, dtype=float)
    if stated == cap:
        return np.asarray(rdp_curve(event, list(alphas), stated), dtype=float)
    doubled = sorted(set(2 * alphas) | set(2 * alphas - 1))
    base = dict(zip(doubled, rdp_curve(event, doubled, stated)))
    return np.asarray([(a - 0.5) / (a - 1) * base[2 * a] + base[2 * a - 1] for a in alphas])


def _check(stated: str, cap: str) -> None:
    refusal = conversion_refusal(stated, cap)
    if refusal is not None:
        raise AccountingError(refusal)

