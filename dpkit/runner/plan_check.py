"""After each cell: does the ledger the run recorded equal the cell's plan (``dpkit budget spec``)?

The plan of a cell is what :func:`dpkit.runner.plan.plan_one` lists: a component's
``planned_spends(privacy)`` when it states them from its params, else the entries its releases
declared before running. A finished run's ledger holds those declared entries plus whatever the
run added: an ∞ entry for a release that carried more than it declared (the wire counts), for a
view entry that never crossed the wire, for private attack knowledge. The check compares the two
lists — cheap, no data loaded, no accounting redone — and says ``equal``, ``not planned`` (a
component that declares neither) or what differs. A difference does not change the ledger (it
never under-states); it means the plan under-stated the run, and the runner reports it.
"""

from __future__ import annotations

from typing import Any

from dpkit.accounting.serialize import guarantee_to_dict
from dpkit.contract.protocols import DeclaresReleases, PlansSpends

EQUAL = "equal"
NOT_PLANNED = "not planned"


def _entries(spends: Any) -> list[tuple[str, int, Any]]:
    return [(label, int(count), guarantee_to_dict(guarantee)) for guarantee, label, count in spends]


def _recorded(ledger: Any, first: int = 0, last: int | None = None) -> list[tuple[str, int, Any]]:
    return _entries((s.guarantee, s.label, s.count) for s in ledger.spends[first:last])


def planned_entries(component: Any, privacy: Any, ledger: Any,
                    declared: int) -> list[tuple[str, int, Any]] | None:
    """The cell's planned ``(label, count, guarantee)`` entries, or None when it plans none.

    ``declared`` is how many entries the ledger held once the cell was opened (its releases
    declared, before ``run``).
    """
    if isinstance(component, PlansSpends):
        from dpkit.runner.cell import framework_spends

        return _entries([*framework_spends(privacy), *component.planned_spends(privacy)])
    if isinstance(component, DeclaresReleases):
        return _recorded(ledger, 0, declared)
    return None


def check_plan(component: Any, privacy: Any, ledger: Any, declared: int) -> str:
    """``equal``, ``not planned``, or ``differs: …`` naming the entries the plan and run disagree on."""
    planned = planned_entries(component, privacy, ledger, declared)
    if planned is None:
        return NOT_PLANNED
    ran = _recorded(ledger)
    if planned == ran:
        return EQUAL
    missing = [f"{label} ×{count}" for label, count, g in planned if (label, count, g) not in ran]
    extra = [f"{label} ×{count}" for label, count, g in ran if (label, count, g) not in planned]
    return (f"differs from the plan: recorded but not planned {extra}; planned but not "
            f"recorded {missing}")
