"""Planned spends of a spec, without running it (``dpkit budget spec``).

For every cell (seeds collapsed) the component is built and asked for its optional
``planned_spends(privacy)``; a mechanism without it contributes its per-token ``guarantee()``.
The spends go through a ledger with the spec's privacy settings, ceiling included.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tabulate import tabulate

from dpkit.accounting.ledger import Ledger
from dpkit.accounting.serialize import describe, guarantee_to_dict
from dpkit.errors import BudgetExceededError

PER_TOKEN_NOTE = ("per token: a run spends it once per released token; two documents at token "
                  "distances dᵢ get ε = η·Σᵢ dᵢ (dχ)")


def planned_spends(component: Any, kind: str, privacy: Any) -> tuple[list[tuple], str]:
    """(spends, note) a component declares before running; the note says what is not listed."""
    if hasattr(component, "planned_spends"):
        spends = list(component.planned_spends(privacy))
        note = "" if spends else "no spends can be listed before running (they depend on the data)"
        return spends, note
    if kind == "mechanism":
        try:
            return [(component.guarantee(), "per token", 1)], PER_TOKEN_NOTE
        except Exception as exc:  # a guarantee may need the model's embedding space
            return [], f"guarantee() needs the model to state it ({type(exc).__name__}: {exc})"
    return [], "the component has no planned_spends(); run the spec to see its spends"


def _finite(values: dict[str, float]) -> dict[str, float | str]:
    return {k: (v if math.isfinite(v) else "inf") for k, v in values.items()}


def plan_cell(component: Any, kind: str, privacy: Any) -> dict[str, Any]:
    """Spends, ledger summary, note and (if the ceiling refuses one) the refusal, for one cell."""
    spends, note = planned_spends(component, kind, privacy)
    ledger = Ledger(delta=privacy.delta, accountant=privacy.accountant,
                    ceiling=getattr(privacy, "ceiling", None))
    refused = None
    for guarantee, label, count in spends:
        try:
            ledger.spend(guarantee, label, count)
        except BudgetExceededError as exc:
            refused = str(exc)
            break
    return {"spends": [{"label": label, "count": count, "guarantee": guarantee_to_dict(g),
                        "description": describe(g)} for g, label, count in spends],
            "summary": _finite(ledger.summary()), "note": note, "refused": refused,
            "reasons": ledger.no_guarantee_reasons}


def plan_spec(path: str) -> list[dict[str, Any]]:
    """One record per (method, sweep point) of the spec at ``path`` (seeds collapsed)."""
    from dpkit.plugins import get_registry
    from dpkit.runner.cells import expand
    from dpkit.spec import PrivacySettings, load_spec

    registry = get_registry()
    spec = load_spec(path, registry)
    plans, seen = [], set()
    for cell in expand(spec, registry):
        key = json.dumps([cell.method, cell.point, cell.privacy], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        privacy = PrivacySettings.model_validate(cell.privacy)
        component = registry.build(cell.kind, cell.component, cell.params)
        plans.append({"method": cell.method, "component": cell.component, "kind": cell.kind,
                      "point": cell.point, **plan_cell(component, cell.kind, privacy)})
    return plans


def plan_table(plans: list[dict[str, Any]]) -> str:
    """A printable table: one row per cell with its spends, totals and notes."""
    rows = []
    for plan in plans:
        point = ", ".join(f"{k}={v}" for k, v in plan["point"].items()) or "-"
        spends = "\n".join(f"{s['label']}: {s['description']} ×{s['count']}"
                           for s in plan["spends"]) or "-"
        totals = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in plan["summary"].items()) or "-"
        notes = "; ".join(n for n in (plan["note"], plan["refused"] and
                                      f"REFUSED by the ceiling: {plan['refused']}") if n)
        rows.append((plan["method"], point, spends, totals, notes))
    return tabulate(rows, headers=["method", "point", "planned spends", "totals", "notes"])
