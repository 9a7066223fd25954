"""A spec's total cost: every cell that reads the same private data composes with the others.

Cells are grouped by the private dataset they read (:mod:`dpkit.budget.fingerprint`) and the
neighbouring relation their guarantees are stated in; each group's spends — every cell, every
seed — go through one :class:`~dpkit.accounting.Ledger`, so (ε, δ)-DP is composed by dp-accounting
(equal events grouped), metric DP adds η per (metric, space, unit) and (k, ε)-anonymity adds ε,
each kept apart. Groups are never composed with each other: different data, or a relation in which
another group's ε says nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dpkit.accounting import Ledger, guarantee_from_dict
from dpkit.budget.fingerprint import DatasetId


class CellSpends(NamedTuple):
    """One finished (or planned) cell: its key, method, dataset, relation and recorded spends."""

    key: str
    method: str
    dataset: DatasetId
    neighboring: str
    spends: list[dict[str, Any]]


@dataclass
class GroupTotal:
    """The composed spends of every cell reading one dataset under one neighbouring relation."""

    dataset: DatasetId
    neighboring: str
    ledger: Ledger
    members: list[CellSpends] = field(default_factory=list)

    def methods(self) -> dict[str, list[CellSpends]]:
        """The group's cells by method, in first-seen order."""
        out: dict[str, list[CellSpends]] = {}
        for cell in self.members:
            out.setdefault(cell.method, []).append(cell)
        return out


def ledger_of(cells: Iterable[CellSpends], delta: float, accountant: str,
              neighboring: str) -> Ledger:
    """One ledger holding every spend of ``cells`` (labels prefixed with the cell key)."""
    ledger = Ledger(delta=delta, accountant=accountant, neighboring=neighboring)
    for cell in cells:
        record_spends(ledger, cell.spends, prefix=f"{cell.key[:8]} ")
    return ledger


def compose_cells(cells: Iterable[CellSpends], delta: float, accountant: str) -> list[GroupTotal]:
    """One :class:`GroupTotal` per (dataset fingerprint, relation), in first-seen order."""
    members: dict[tuple[str, str], list[CellSpends]] = {}
    for cell in cells:
        members.setdefault((cell.dataset.fingerprint, cell.neighboring), []).append(cell)
    return [GroupTotal(group[0].dataset, relation, ledger_of(group, delta, accountant, relation),
                       group) for (_, relation), group in members.items()]


def record_spends(ledger: Ledger, spends: Iterable[Mapping[str, Any]], prefix: str = "") -> None:
    """Spend every ``{"label", "count", "guarantee"}`` record (as ``Ledger.to_dict`` writes them)."""
    for item in spends:
        ledger.spend(guarantee_from_dict(item["guarantee"]), f"{prefix}{item['label']}",
                     int(item["count"]))


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else "inf"


def ledger_record(ledger: Ledger) -> dict[str, Any]:
    """Each notion of a composed ledger, kept apart, JSON-ready (∞ as ``"inf"``)."""
    out: dict[str, Any] = {"releases": len(ledger)}
    if any(s.guarantee.notion in ("dp", "none") for s in ledger.spends):
        out["dp"] = {"epsilon": _finite(ledger.epsilon()), "delta": ledger.delta_target,
                     "accountant": ledger.accountant}
    per_pass = ledger.eta_totals(per_token=True)
    if per_pass:
        out["metric_dp"] = [{"metric": m, "space": s, "unit": u, "eta_per_unit": _finite(eta),
                             "eta_over_all_releases": _finite(ledger.eta_totals()[(m, s, u)])}
                            for (m, s, u), eta in per_pass.items()]
    k = ledger.k_anonymity()
    if k is not None:
        out["k_anonymity"] = {"k_achieved": k.k_achieved, "k_requested": k.k_requested,
                              "share_below_k": k.share_below_k, "epsilon": _finite(k.epsilon)}
    if ledger.no_guarantee_reasons:
        out["no_guarantee_reasons"] = ledger.no_guarantee_reasons
    return out


def describe_ledger(ledger: Ledger) -> list[str]:
    """Each notion of a composed ledger in words, one line each (empty for no release)."""
    record, lines = ledger_record(ledger), []
    if "dp" in record:
        eps = ledger.epsilon()
        lines.append(f"(ε, δ)-DP: ε = {_number(eps)} at δ = {ledger.delta_target:g} "
                     f"({ledger.accountant.upper()}, dp-accounting)")
    for item in record.get("metric_dp", []):
        where = f" on {item['space']}" if item["space"] else ""
        lines.append(f"metric DP ({item['metric']}{where}): η = {_number(item['eta_per_unit'])} per "
                     f"{item['unit']} — ε = η·d(x, x′), kept apart from (ε, δ)")
    if "k_anonymity" in record:
        k = record["k_anonymity"]
        lines.append(f"(k, ε)-anonymity: k_achieved = {k['k_achieved']}, ε = {_number(k['epsilon'])}"
                     " — kept apart; k has no composition theorem")
    lines += [f"no guarantee (ε = ∞): {reason}" for reason in record.get("no_guarantee_reasons", [])]
    return lines


def _number(value: float | str) -> str:
    if isinstance(value, str) or math.isinf(value):
        return "∞"
    return f"{value:.6g}"
