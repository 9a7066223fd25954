"""What one ``dpkit run`` charges to the budget store: reserve, commit per cell, finish.

The store is on by default (``$DPKIT_BUDGET_STORE=off`` turns it off): a budget is only as good as
the history it has seen, and a run that was not recorded cannot be counted later. Without a cap
nothing can be refused, so nothing is planned: the run is recorded and each finished cell's spends
are committed. With a cap on a dataset a cell reads, every pending cell is planned first (the same
call as ``dpkit budget spec``) and the whole plan reserved against the cap — refused, with nothing
run, when the privacy filter would pass the cap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpkit.base.results import CellResult
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore, Request
from dpkit.base.errors import BudgetStoreError


class RunBudget:
    """The charges of one run: which store run each cell is charged to."""

    def __init__(self, store: BudgetStore | None = None, run_of: dict[str, int] | None = None):
        self.store, self.run_of = store, run_of or {}

    def commit(self, cell_key: str, row: CellResult) -> None:
        """Charge a finished cell what its ledger recorded (call before writing its results)."""
        if self.store is not None and cell_key in self.run_of:
            self.store.commit(self.run_of[cell_key], cell_key, row.ledger.get("spends", []))

    def finish(self) -> None:
        """Close, release or keep open each of the run's store runs (see :class:`BudgetStore`)."""
        if self.store is not None:
            for run_id in sorted(set(self.run_of.values())):
                self.store.finish(run_id)


def reserve_run(spec: Any, pending: list[Any], out: Path, registry: Any) -> RunBudget:
    """Reserve ``pending`` cells' budget (planned only where a dataset is capped); see module doc."""
    store = BudgetStore.default()
    if store is None or not pending:
        return RunBudget()
    ids = DatasetIds(registry)
    groups: dict[tuple[str, str], tuple[Any, list[Any]]] = {}
    for cell in pending:
        dataset = ids(cell.data)
        relation = cell.privacy.get("neighboring", "add_remove")
        groups.setdefault((dataset.fingerprint, relation), (dataset, []))[1].append(cell)
    requests = []
    for (fingerprint, relation), (dataset, cells) in groups.items():
        capped = store.cap(fingerprint, relation) is not None
        planned = {c.key: (_planned(c, registry) if capped else None) for c in cells}
        requests.append(Request(dataset, relation, planned))
    run_ids = store.reserve(requests, spec.name, str(Path(out).resolve()))
    return RunBudget(store, {c.key: run_ids[fp] for (fp, _), (_, cells) in groups.items()
                             for c in cells})


def _planned(cell: Any, registry: Any) -> list[dict[str, Any]]:
    """The spends ``dpkit budget spec`` plans for ``cell``; refused when they are not all known."""
    from dpkit.runner.plan import plan_one

    plan = plan_one(cell, registry)
    if plan["refused"] or plan["note"]:
        raise BudgetStoreError(f"cell {cell.key} ({cell.method} {cell.point or ''}) reads a capped "
                               f"dataset but its spends cannot be reserved before it runs: "
                               f"{plan['refused'] or plan['note']}")
    return [{k: s[k] for k in ("label", "count", "guarantee")} for s in plan["spends"]]
