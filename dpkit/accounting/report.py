"""Printable ledger tables (tabulate), from what a ledger answers (:class:`LedgerView`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from tabulate import tabulate

from dpkit.accounting.rules import K_COMPOSITION_NOTE, KAnonymityTotal
from dpkit.accounting.serialize import describe


class LedgerView(Protocol):
    """What a table reads from a ledger (:class:`dpkit.accounting.Ledger` has all of it)."""

    accountant: str
    delta_target: float
    ceiling: Any
    no_guarantee_reasons: list[str]

    @property
    def spends(self) -> Sequence[Any]: ...

    def epsilon(self) -> float: ...

    def eta_totals(self, per_token: bool = False) -> dict[tuple[str, str, str], float]: ...

    def k_anonymity(self) -> KAnonymityTotal | None: ...

    def remaining(self) -> dict[str, float]: ...


def _fmt(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.6g}"


def ledger_table(ledger: LedgerView) -> str:
    """Spends (label, notion, guarantee, count) then totals per notion, as plain text."""
    rows = [(i + 1, s.label, s.guarantee.notion, describe(s.guarantee), s.count)
            for i, s in enumerate(ledger.spends)]
    parts = [tabulate(rows, headers=["#", "label", "notion", "guarantee", "count"])
             if rows else "(no spends)"]
    totals: list[tuple[str, str]] = []
    if any(s.guarantee.notion in ("dp", "none") for s in ledger.spends):
        totals.append((f"(ε, δ)-DP [{ledger.accountant}]",
                       f"ε = {_fmt(ledger.epsilon())} at δ = {ledger.delta_target:g}"))
    per_pass = ledger.eta_totals(per_token=True)
    for key, eta in ledger.eta_totals().items():
        metric, space, unit = key
        where = f" on {space}" if space else ""
        totals.append(("metric DP", f"η = {_fmt(per_pass[key])} per {unit} ({metric}{where}); "
                                    f"Σ over all releases {_fmt(eta)}"))
    k = ledger.k_anonymity()
    if k is not None:
        totals.append(("(k, ε)-anonymity",
                       f"k_achieved = {k.k_achieved} (requested {k.k_requested}, "
                       f"{k.share_below_k:.1%} below), ε = {_fmt(k.epsilon)}"))
        totals.append(("", K_COMPOSITION_NOTE))
    for reason in ledger.no_guarantee_reasons:
        totals.append(("no guarantee", f"ε = ∞: {reason}"))
    if ledger.ceiling is not None:
        left = ", ".join(f"{key} {_fmt(v)}" for key, v in ledger.remaining().items()
                         if getattr(ledger.ceiling, key) is not None)
        totals.append(("remaining", left))
    if totals:
        parts.append(tabulate(totals, headers=["total", "value"]))
    return "\n\n".join(parts)
