"""Planned spends of a spec, without running it (``dpkit budget spec``): plan = run by construction.

Each cell is opened exactly as a run opens it (:func:`dpkit.runner.cell.open_cell`: the same
defense, ledger, context and declared releases), and its ledger is read instead of running the
defense. Components whose spends depend only on their params implement ``planned_spends(privacy)``,
which is then the plan (no data loaded) even if they also declare releases; each run checks its
ledger against it (:mod:`dpkit.runner.plan_check`). Anything else is listed with a note that its
spends are only known by running it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch
from tabulate import tabulate

from dpkit.accounting.ledger import Ledger
from dpkit.accounting.serialize import describe, guarantee_to_dict
from dpkit.base.errors import BudgetExceededError
from dpkit.contract.protocols import DeclaresReleases, PlansSpends
from dpkit.contract.registry import Registry
from dpkit.runner.cell import declare_releases, ledger_for, open_cell

NOT_DECLARED = ("the component declares neither releases(ctx) nor planned_spends(); run the spec "
                "to see its spends")


def _finite(values: dict[str, float]) -> dict[str, float | str]:
    return {k: (v if math.isfinite(v) else "inf") for k, v in values.items()}


def _note(component: Any, ledger: Ledger) -> str:
    if isinstance(component, DeclaresReleases):
        return ""
    if isinstance(component, PlansSpends):
        return "" if ledger.spends else "no spends can be listed before running"
    return NOT_DECLARED


def _record(ledger: Ledger, note: str, refused: str | None) -> dict[str, Any]:
    return {"spends": [{"label": s.label, "count": s.count,
                        "guarantee": guarantee_to_dict(s.guarantee),
                        "description": describe(s.guarantee)} for s in ledger.spends],
            "summary": _finite(ledger.summary()), "note": note, "refused": refused,
            "reasons": ledger.no_guarantee_reasons}


def plan_cell(component: Any, kind: str, privacy: Any, ctx: Any = None) -> dict[str, Any]:
    """Spends, ledger summary, note and (if the ceiling refuses one) the refusal, for one component.

    ``ctx`` is a :class:`dpkit.contract.context.RunContext` with the cell's data and model; it is
    needed for components that declare releases (their counts come from the data) and do not
    state their spends from their params (``planned_spends``, which wins when both exist).
    """
    ledger = ledger_for(privacy)
    refused = None
    try:
        if isinstance(component, PlansSpends):
            for guarantee, label, count in component.planned_spends(privacy):
                ledger.spend(guarantee, label, count)
        elif isinstance(component, DeclaresReleases):
            if ctx is None:
                raise ValueError(f"{type(component).__name__} declares releases from the data; "
                                 "pass the cell's RunContext as ctx=")
            declare_releases(component, ctx.for_plan(ledger))
    except BudgetExceededError as exc:
        refused = str(exc)
    return _record(ledger, "" if refused else _note(component, ledger), refused)


def plan_one(cell: Any, registry: Registry) -> dict[str, Any]:
    """The planned record of one expanded cell, opened exactly as a run opens it."""
    from dpkit.spec import PrivacySettings

    ledger = ledger_for(PrivacySettings.model_validate(cell.privacy))
    refused, defense = None, None
    try:
        defense = open_cell(cell, registry, torch.device("cpu"), planning=True,
                            ledger=ledger).defense
    except BudgetExceededError as exc:
        refused = str(exc)
    note = _note(defense, ledger) if defense is not None else ""
    return _record(ledger, note, refused)


def plan_spec(path: str, registry: Registry) -> list[dict[str, Any]]:
    """One record per cell of the spec at ``path``; seeds that plan identically are merged."""
    from dpkit.spec import expand, load_spec

    spec = load_spec(path, registry=registry)
    plans: list[dict[str, Any]] = []
    index: dict[str, dict[str, Any]] = {}
    for cell in expand(spec, registry):
        record = plan_one(cell, registry)
        key = json.dumps([cell.method, cell.point, record], sort_keys=True, default=str)
        if key in index:
            index[key]["seeds"].append(cell.seed)
            continue
        index[key] = {"method": cell.method, "component": cell.component, "kind": cell.kind,
                      "point": cell.point, "seeds": [cell.seed], "data": cell.data,
                      "neighboring": cell.privacy.get("neighboring", "add_remove"), **record}
        plans.append(index[key])
    return plans


def plan_table(plans: list[dict[str, Any]]) -> str:
    """A printable table: one row per cell with its spends, totals and notes."""
    rows = []
    for plan in plans:
        point = ", ".join(f"{k}={v}" for k, v in plan["point"].items()) or "-"
        if len(plan.get("seeds", [])) > 0:
            point += f" (seeds {','.join(str(s) for s in plan['seeds'])})"
        spends = "\n".join(f"{s['label']}: {s['description']} ×{s['count']}"
                           for s in plan["spends"]) or "-"
        totals = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in plan["summary"].items()) or "-"
        notes = "; ".join(n for n in (plan["note"], plan["refused"] and
                                      f"REFUSED by the ceiling: {plan['refused']}") if n)
        rows.append((plan["method"], point, spends, totals, notes))
    return tabulate(rows, headers=["method", "point", "planned spends", "totals", "notes"])
