"""What one ``dpkit run`` charges to the budget store: reserve, guard every spend, end each cell.

The store is on by default (``$DPKIT_BUDGET_STORE=off`` turns it off): a budget is only as good as
the history it has seen. Every pending cell's dataset is identified by its records; a cell that
reads records of a capped dataset is planned first (the same call as ``dpkit budget spec``) and
the whole plan reserved — refused, with nothing run, when a cap would pass. While a cell runs,
its ledger's guard (:class:`CellGuard`, set for each attempt by the executor, in a Ray worker
too) charges every spend to the store *before* the ledger records it, so before the release it
covers; a spend past a cap is refused there and nothing is released. A finished or failed cell
keeps its charges; a run whose process dies is settled by the next run into its folder or by
``dpkit budget close`` (:mod:`dpkit.budget.store`).
"""

from __future__ import annotations

import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.accounting import guarantee_to_dict
from dpkit.base.results import CellResult
from dpkit.base.errors import BudgetStoreError
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore, CellPlan

_STORES: dict[str, BudgetStore] = {}


def _store(location: str) -> BudgetStore:
    """One opened store per location per process (a Ray worker opens its own)."""
    if location not in _STORES:
        _STORES[location] = BudgetStore(location)
    return _STORES[location]


@dataclass(frozen=True)
class CellGuard:
    """A cell attempt's ledger guard: charges each spend to the store before it is recorded.

    Picklable (a store location and ids), so a Ray worker charges the same store; the store must
    then be reachable from the worker (an SQLAlchemy URL for a cluster of several machines).
    """

    location: str
    run_id: int
    cell: str
    attempt: int = 1

    def __call__(self, spend: Any) -> None:
        """Charge ``spend`` (a :class:`~dpkit.accounting.Spend`); raises to refuse it."""
        record = {"label": spend.label, "count": int(spend.count),
                  "guarantee": guarantee_to_dict(spend.guarantee)}
        _store(self.location).charge(self.run_id, self.cell, record, self.attempt)


class RunBudget:
    """The store run of one ``dpkit run``: guards for its cells, and each cell's end."""

    def __init__(self, store: BudgetStore | None = None, run_id: int | None = None):
        self.store, self.run_id = store, run_id

    def guard_for(self, cell: Any, attempt: int) -> CellGuard | None:
        """The guard of one attempt of ``cell`` (None when the store is off)."""
        if self.store is None or self.run_id is None:
            return None
        return CellGuard(self.store.location, self.run_id, cell.key, attempt)

    def commit(self, cell_key: str, row: CellResult) -> None:
        """A cell finished: its charges stand, its unused reservation is given back."""
        if self.store is not None and self.run_id is not None:
            self.store.end_cell(self.run_id, cell_key, "done", row.ledger.get("spends", []))

    def fail(self, cell_key: str) -> None:
        """A cell failed after its last attempt: what it charged stays charged."""
        if self.store is not None and self.run_id is not None:
            self.store.end_cell(self.run_id, cell_key, "failed")

    def finish(self) -> None:
        """Settle the run: ``closed`` if anything was charged, else ``released``."""
        if self.store is not None and self.run_id is not None:
            self.store.finish(self.run_id)


def reserve_run(spec: Any, pending: list[Any], out: Path, registry: Any) -> RunBudget:
    """Reserve ``pending`` cells' budget (planned where a capped dataset's records are read).

    The caller holds ``out``'s lock: an open run of that folder on this host is dead and is
    settled first. The store's whole history is verified before anything is reserved.
    """
    store = BudgetStore.default()
    if store is None:
        return RunBudget()
    store.state(deep=True)  # refuses a store whose history or records were edited
    folder = str(Path(out).resolve())
    store.take_over(folder)  # a dead run of this folder is settled, even with nothing pending
    if not pending:
        return RunBudget()
    ids = DatasetIds(registry)
    capped: dict[str, bool] = {}
    plans = {}
    for cell in pending:
        dataset = ids(cell.data)
        if dataset.fingerprint not in capped:
            capped[dataset.fingerprint] = bool(store.capped_links(dataset))
        relation = cell.privacy.get("neighboring", "add_remove")
        spends = _planned(cell, registry) if capped[dataset.fingerprint] else None
        plans[cell.key] = CellPlan(dataset, relation, spends)
    run_id = store.reserve(plans, spec.name, folder)
    return RunBudget(store, run_id)


def _planned(cell: Any, registry: Any) -> list[dict[str, Any]]:
    """The spends ``dpkit budget spec`` plans for ``cell``; refused when they are not all known."""
    from dpkit.runner.plan import plan_one

    plan = plan_one(cell, registry)
    if plan["refused"] or plan["note"]:
        raise BudgetStoreError(f"cell {cell.key} ({cell.method} {cell.point or ''}) reads a capped "
                               f"dataset but its spends cannot be reserved before it runs: "
                               f"{plan['refused'] or plan['note']}")
    return [{k: s[k] for k in ("label", "count", "guarantee")} for s in plan["spends"]]


def run_liveness(run: Any) -> str | None:
    """Why a store run may still be running (None: its process is gone, its folder's lock free)."""
    from dpkit.runner.lock import LOCK_NAME

    if run.host and run.host != socket.gethostname():
        return (f"it ran on host {run.host}; its lock can only be checked there: run dpkit budget "
                f"close {run.id} on {run.host}")
    try:
        fd = os.open(Path(run.out_dir) / LOCK_NAME, os.O_RDWR)
    except FileNotFoundError:
        return None  # never locked there, or the folder is gone: no process holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or f"pid {run.pid}"
        return (f"its process is alive ({holder}) and holds the lock of {run.out_dir}; stop it "
                "first (Ctrl-C ends it cleanly)")
    finally:
        os.close(fd)  # closing also drops the lock if we took it
    return None
