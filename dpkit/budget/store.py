"""The persistent budget store: every charge to the people in a private dataset, and its cap.

A dataset is its set of record hashes (:mod:`dpkit.budget.fingerprint`); a cap counts every cell
of every run whose records overlap it, under any relation (converted or refused), for every
notion (:mod:`dpkit.budget.caps`). A run **reserves** its plan before the first cell; while it
runs, each cell's ledger **charges** every spend *before* recording it — so before the release it
covers — through the ledger's guard (:class:`dpkit.runner.budget.CellGuard`): a spend its
reservation covers is recorded as is, any other is admitted by the caps or refused, and nothing
is released. What crossed is therefore charged whatever happens after: a cell that fails keeps
its charges, and a run whose process died is settled — each cell that charged anything is
settled as spent (its charges plus what it reserved and had not charged yet), a cell that charged
nothing gives its reservation back. Every act is one serialised write transaction appending to
the hash-chained log (:mod:`dpkit.budget.chain`); the state is the log replayed (:mod:`.state`).
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.base.errors import BudgetStoreError
from dpkit.budget import chain
from dpkit.budget.caps import admit
from dpkit.budget.fingerprint import DatasetId
from dpkit.budget.schema import open_backend
from dpkit.budget.state import State, replay, spend_key

STORE_ENV = "DPKIT_BUDGET_STORE"


def default_location() -> str | None:
    """``$DPKIT_BUDGET_STORE`` (a path or SQLAlchemy URL; ``off`` disables), else the cache's file."""
    from dpkit.base.cache import cache_root

    value = os.environ.get(STORE_ENV, "").strip()
    if value.lower() in ("off", "none", "0", "false"):
        return None
    return value or str(cache_root() / "budget" / "store.sqlite")


@dataclass(frozen=True)
class CellPlan:
    """What one cell asks: the dataset it reads, its relation, its planned spends (None: unplanned)."""

    dataset: DatasetId
    relation: str
    spends: list[dict[str, Any]] | None


class BudgetStore:
    """Open (creating or migrating) the store at ``location``: an SQLite path or SQLAlchemy URL."""

    def __init__(self, location: str | Path):
        self.location = str(location)
        self.backend = open_backend(self.location)
        self.where = self.backend.where

    @classmethod
    def default(cls) -> BudgetStore | None:
        """The store ``dpkit run`` charges (see :func:`default_location`); None when turned off."""
        location = default_location()
        return None if location is None else cls(location)

    # ------------------------------------------------------------------ reading
    def state(self, deep: bool = False) -> State:
        """The verified state; ``deep`` also checks every dataset's stored records."""
        with self.backend.transaction(write=False) as run:
            entries = chain.read_log(run, self.where)
            state = replay(entries)
            if deep:
                self._check_records(run, state)
        return state

    def verify(self, expect_head: str | None = None) -> dict[str, Any]:
        """Check the whole history (chain, head, record sets); raises naming the first bad entry."""
        from dpkit.budget.verify import verify_store

        return verify_store(self, expect_head)

    def _check_records(self, run: Any, state: State) -> None:
        from dpkit.budget.verify import check_records

        check_records(run, state, self.where)

    # -------------------------------------------------------------- datasets
    def _register(self, run: Any, entries: list, state: State, dataset: DatasetId) -> None:
        fp = dataset.fingerprint
        if fp in state.datasets:
            if dataset.name not in state.datasets[fp]["names"]:
                state.apply(chain.append(run, entries, "alias", {"id": fp, "name": dataset.name,
                                                                 "basis": dataset.basis}))
            return
        overlaps: dict[str, int] = {}
        if dataset.records is not None:
            stored: dict[str, set[str]] = {}
            for other, record in run("SELECT dataset, record FROM dpkit_budget_records"):
                stored.setdefault(other, set()).add(record)
            overlaps = {other: len(dataset.records & recs) for other, recs in stored.items()
                        if other in state.datasets and dataset.records & recs}
            run("INSERT INTO dpkit_budget_records (dataset, record) VALUES (:d, :r)",
                [{"d": fp, "r": r} for r in sorted(dataset.records)])
        body = {"id": fp, "name": dataset.name, "basis": dataset.basis,
                "records": len(dataset.records or ()), "overlaps": overlaps}
        state.apply(chain.append(run, entries, "dataset", body))

    def register(self, dataset: DatasetId) -> None:
        """Record ``dataset`` (its record hashes and overlaps) if new, or a new name for it."""
        with self._writing() as (run, entries, state):
            self._register(run, entries, state, dataset)

    def capped_links(self, dataset: DatasetId) -> list[str]:
        """Fingerprints of capped datasets sharing a record with ``dataset`` (stored or not)."""
        state = self.state()
        if dataset.fingerprint in state.datasets:
            return [fp for fp in state.linked(dataset.fingerprint) if fp in state.caps]
        out = []
        with self.backend.transaction(write=False) as run:
            for fp in state.caps:
                if dataset.records is None or not fp.startswith("records:"):
                    continue
                recs = {r for (r,) in run("SELECT record FROM dpkit_budget_records WHERE dataset "
                                          "= :d", {"d": fp})}
                if recs & dataset.records:
                    out.append(fp)
        return out

    # ------------------------------------------------------------------ caps
    def set_cap(self, dataset: DatasetId, relation: str = "add_remove", *,
                epsilon: float | None = None, delta: float | None = None, eta: float | None = None,
                anonymity_epsilon: float | None = None, raise_cap: bool = False,
                reason: str = "") -> dict[str, Any]:
        """Cap ``dataset`` (see :mod:`dpkit.budget.limits`); returns what it governs and warnings."""
        from dpkit.budget.limits import cap_change

        with self._writing() as (run, entries, state):
            self._register(run, entries, state, dataset)
            body, said = cap_change(state, dataset, relation, epsilon, delta, eta,
                                    anonymity_epsilon, raise_cap, reason, _who())
            state.apply(chain.append(run, entries, "cap", body))
        return said

    def lift_cap(self, dataset: DatasetId, reason: str) -> None:
        """Remove a dataset's cap: an explicit act, recorded with its reason, user and time."""
        if not reason.strip():
            raise BudgetStoreError("lifting a cap needs a reason (--reason), kept in the history")
        with self._writing() as (run, entries, state):
            if dataset.fingerprint not in state.caps:
                raise BudgetStoreError(f"{dataset.short} has no cap to lift")
            old = state.caps[dataset.fingerprint]
            state.apply(chain.append(run, entries, "cap", {
                "id": dataset.fingerprint, "act": "lift", "relation": old.relation,
                "reason": reason, "by": _who()}))

    # ------------------------------------------------------------- a run's life
    def reserve(self, cells: Mapping[str, CellPlan], spec: str, out_dir: str,
                dead_here: bool = False) -> int:
        """Reserve every cell at once (all or none) and return the run's id.

        Cells reading records of a capped dataset need planned spends, admitted by the caps.
        ``dead_here``: the caller holds ``out_dir``'s lock, so an open run of that folder on
        this host is dead, and is settled first.
        """
        if dead_here:  # settled whether or not this run is admitted
            self.take_over(out_dir)
        with self._writing() as (run, entries, state):
            for plan in cells.values():
                self._register(run, entries, state, plan.dataset)
            new = []
            for key, plan in cells.items():
                fp = plan.dataset.fingerprint
                capped = [c for c in state.linked(fp) if c in state.caps]
                if capped and plan.spends is None:
                    raise BudgetStoreError(f"cell {key} reads records of a capped dataset "
                                           f"({state.datasets[capped[0]]['name']}) but has no "
                                           "planned spends to reserve; nothing was run")
                new += [(fp, plan.relation, s) for s in plan.spends or []]
            admit(state, new, self.where)
            run_id = max(state.runs, default=0) + 1
            body = {"run": run_id, "spec": spec, "out_dir": out_dir, "host": socket.gethostname(),
                    "pid": os.getpid(), "cells": {
                        k: {"dataset": p.dataset.fingerprint, "relation": p.relation,
                            "spends": p.spends} for k, p in cells.items()}}
            state.apply(chain.append(run, entries, "run", body))
        return run_id

    def take_over(self, out_dir: str) -> list[int]:
        """Settle the open runs of ``out_dir`` on this host: the caller holds its lock, so their
        processes are gone. Returns their ids."""
        with self._writing() as (run, entries, state):
            dead = [r.id for r in state.runs.values() if r.state == "open"
                    and r.out_dir == out_dir and r.host == socket.gethostname()]
            for run_id in dead:
                self._settle(run, entries, state, run_id, "takeover")
        return dead

    def charge(self, run_id: int, cell: str, spend: dict[str, Any], attempt: int = 1) -> None:
        """Charge one spend of ``cell`` before it is recorded (the guard); raises to refuse it."""
        with self._writing() as (run, entries, state):
            target = self._open_cell(state, run_id, cell)
            matched = any(spend_key(s) == spend_key(spend) for s in target.unmatched)
            if not matched:
                admit(state, [(target.dataset, target.relation, spend)], self.where,
                      f"cell {cell}'s spend {spend['label']!r} (×{spend['count']}, not in its "
                      "reservation)")
            state.apply(chain.append(run, entries, "charge", {
                "run": run_id, "cell": cell, "attempt": attempt, "spend": spend,
                "matched": matched}))

    def end_cell(self, run_id: int, cell: str, outcome: str,
                 recorded: list[dict[str, Any]] | None = None) -> None:
        """A cell ended in a live process (``done`` / ``failed``): what it did not charge is given
        back. ``recorded`` (a finished cell's ledger) is charged now if no guard charged it."""
        with self._writing() as (run, entries, state):
            target = self._open_cell(state, run_id, cell)
            if recorded and not target.charges:  # ran without the guard: charge what it recorded
                for spend in recorded:
                    state.apply(chain.append(run, entries, "charge", {
                        "run": run_id, "cell": cell, "attempt": 0, "spend": spend,
                        "matched": False, "late": True}))
            state.apply(chain.append(run, entries, "end", {"run": run_id, "cell": cell,
                                                           "outcome": outcome}))

    def finish(self, run_id: int) -> str:
        """End a run whose process is still alive: ``closed`` if it charged anything, else
        ``released``; cells that never ended are settled (see the module doc)."""
        with self._writing() as (run, entries, state):
            return self._settle(run, entries, state, run_id, "finish")

    def close(self, run_id: int, is_live: Callable[[Any], str | None]) -> str:
        """Settle a run whose process is gone; ``is_live(run)`` says why it may still be alive."""
        with self._writing() as (run, entries, state):
            if run_id not in state.runs:
                raise BudgetStoreError(f"no run {run_id} in the budget store {self.where}")
            target = state.runs[run_id]
            if target.state != "open":
                return target.state
            alive = is_live(target)
            if alive:
                raise BudgetStoreError(f"run {run_id} is not closed: {alive}")
            return self._settle(run, entries, state, run_id, "close")

    # --------------------------------------------------------------- helpers
    def _writing(self) -> Any:
        return _Writing(self)

    def _open_cell(self, state: State, run_id: int, cell: str) -> Any:
        target = state.runs.get(run_id)
        if target is None or cell not in target.cells:
            raise BudgetStoreError(f"no cell {cell} of run {run_id} in the budget store {self.where}")
        if target.state != "open" or target.cells[cell].ended is not None:
            raise BudgetStoreError(f"run {run_id} cell {cell} was already settled "
                                   f"({target.state}); its spends cannot be charged to it")
        return target.cells[cell]

    def _settle(self, run: Any, entries: list, state: State, run_id: int, by: str) -> str:
        target = state.runs[run_id]
        if target.state != "open":
            return target.state
        cells = {k: ("spent" if c.charges else "released")
                 for k, c in target.cells.items() if c.ended is None}
        charged = any(c.charges for c in target.cells.values())
        state.apply(chain.append(run, entries, "settle", {
            "run": run_id, "by": by, "cells": cells, "state": "closed" if charged else "released"}))
        return target.state


class _Writing:
    """A write transaction with the verified log and its replayed state."""

    def __init__(self, store: BudgetStore):
        self.store = store

    def __enter__(self) -> tuple[Any, list, State]:
        self._cm = self.store.backend.transaction(write=True)
        run = self._cm.__enter__()
        try:
            entries = chain.read_log(run, self.store.where)
        except BaseException as exc:
            self._cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return run, entries, replay(entries)

    def __exit__(self, *exc: Any) -> Any:
        return self._cm.__exit__(*exc)


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"

