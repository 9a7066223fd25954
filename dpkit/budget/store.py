"""The persistent budget store: every run charged to a private dataset, and the dataset's cap.

Keyed by (dataset fingerprint, neighbouring relation). A run is ``open`` from its reservation
until it finishes: its cells are charged what was planned (``reserved``) until each one's actual
spends replace the plan (``spent``). When a run ends with every cell spent it is ``closed``; when
it spent nothing its reservation is given back (``released``); otherwise it stays ``open``,
holding its unspent reservations for the resume (``dpkit run`` into the same folder picks it up) or
for ``dpkit budget close``. A reservation on a capped dataset is admitted by the privacy filter
(:mod:`dpkit.budget.filter`) inside one serialised write transaction, so two processes reserving
at once can never overspend, and a process killed at any point leaves either the whole reservation
or none of it. Schema version 1; tables ``dpkit_budget_{meta,datasets,runs,charges}``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.budget.fingerprint import DatasetId
from dpkit.budget.schema import open_backend
from dpkit.budget.sql import Run
from dpkit.base.errors import BudgetExceededError, BudgetStoreError

STORE_ENV = "DPKIT_BUDGET_STORE"
CAP_TOLERANCE = 1e-9


def default_location() -> str | None:
    """``$DPKIT_BUDGET_STORE`` (a path or SQLAlchemy URL; ``off`` disables), else the cache's file."""
    from dpkit.base.cache import cache_root

    value = os.environ.get(STORE_ENV, "").strip()
    if value.lower() in ("off", "none", "0", "false"):
        return None
    return value or str(cache_root() / "budget" / "store.sqlite")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass(frozen=True)
class Request:
    """What one run asks of one dataset: its cells, each with planned spends or None (unplanned)."""

    dataset: DatasetId
    neighboring: str
    planned: Mapping[str, list[dict[str, Any]] | None]


class BudgetStore:
    """Open (creating if new) the store at ``location``: an SQLite path or an SQLAlchemy URL."""

    def __init__(self, location: str | Path):
        self.backend = open_backend(str(location))
        self.where = self.backend.where

    @classmethod
    def default(cls) -> BudgetStore | None:
        """The store ``dpkit run`` charges (see :func:`default_location`); None when turned off."""
        location = default_location()
        return None if location is None else cls(location)

    # ------------------------------------------------------------------ caps
    def set_cap(self, dataset: DatasetId, neighboring: str, epsilon: float, delta: float,
                force: bool = False) -> None:
        """Cap ``dataset`` at ``epsilon`` at ``delta``; raising a cap, or a first cap over existing
        charges, needs ``force`` (the filter's guarantee assumes the cap came first)."""
        if not (epsilon > 0 and 0 < delta < 1):
            raise BudgetStoreError(f"a cap needs ε > 0 and δ in (0, 1), got ε={epsilon}, δ={delta}")
        with self.backend.transaction(write=True) as run:
            self._ensure_dataset(run, dataset, neighboring)
            (old_eps, old_delta), = run("SELECT cap_epsilon, cap_delta FROM dpkit_budget_datasets "
                                        "WHERE fingerprint = :f AND neighboring = :n",
                                        {"f": dataset.fingerprint, "n": neighboring})
            charged = self._charges(run, dataset.fingerprint, neighboring)
            loosened = old_eps is not None and (epsilon > old_eps or delta > old_delta)
            if not force and (loosened or (old_eps is None and charged)):
                why = (f"it would raise the cap ε = {old_eps:g} at δ = {old_delta:g}" if loosened
                       else f"{dataset.name} already has {len(charged)} charged cell(s)")
                raise BudgetStoreError(f"not capping {dataset.short}: {why}. A privacy filter is "
                                       "valid only for a cap fixed before the runs it governs "
                                       "(docs/accounting.md); pass --force to set it anyway")
            run("UPDATE dpkit_budget_datasets SET cap_epsilon = :e, cap_delta = :d WHERE "
                "fingerprint = :f AND neighboring = :n", {"e": float(epsilon), "d": float(delta),
                                                           "f": dataset.fingerprint, "n": neighboring})

    def cap(self, fingerprint: str, neighboring: str) -> tuple[float, float] | None:
        """(ε, δ) cap of a dataset, or None."""
        with self.backend.transaction(write=False) as run:
            rows = run("SELECT cap_epsilon, cap_delta FROM dpkit_budget_datasets WHERE "
                       "fingerprint = :f AND neighboring = :n", {"f": fingerprint, "n": neighboring})
        return (rows[0][0], rows[0][1]) if rows and rows[0][0] is not None else None

    # ------------------------------------------------------------- a run's life
    def reserve(self, requests: list[Request], spec: str, out_dir: str) -> dict[str, int]:
        """Reserve every request at once (all or none); returns run ids by dataset fingerprint.

        A capped dataset needs every cell planned and is admitted by the filter; an ``open`` run
        of the same folder is resumed (its unspent reservations replaced by this plan).
        """
        from dpkit.budget.filter import filter_epsilon

        ids: dict[str, int] = {}
        with self.backend.transaction(write=True) as run:
            for req in requests:
                fp, rel = req.dataset.fingerprint, req.neighboring
                self._ensure_dataset(run, req.dataset, rel)
                (cap_eps, cap_delta), = run("SELECT cap_epsilon, cap_delta FROM "
                                            "dpkit_budget_datasets WHERE fingerprint = :f AND "
                                            "neighboring = :n", {"f": fp, "n": rel})
                resumed = run("SELECT id FROM dpkit_budget_runs WHERE fingerprint = :f AND "
                              "neighboring = :n AND out_dir = :o AND state = 'open'",
                              {"f": fp, "n": rel, "o": out_dir})
                run_id = resumed[0][0] if resumed else None
                spent = {c for (c,) in run("SELECT cell FROM dpkit_budget_charges WHERE run_id = "
                                           ":r AND state = 'spent'", {"r": run_id})}
                new = {k: v for k, v in req.planned.items() if k not in spent}
                if cap_eps is not None:
                    unplanned = [k for k, v in new.items() if v is None]
                    if unplanned:
                        raise BudgetStoreError(f"{req.dataset.short} is capped, but cell "
                                               f"{unplanned[0]} has no planned spends to reserve")
                    past = self._charges(run, fp, rel, skip_reserved_of=run_id)
                    planned = [s for v in new.values() for s in (v or [])]
                    self._admit(req.dataset, cap_eps, cap_delta, past, planned, filter_epsilon, rel)
                if run_id is None:
                    (run_id,), = run("SELECT COALESCE(MAX(id), 0) + 1 FROM dpkit_budget_runs")
                    run("INSERT INTO dpkit_budget_runs VALUES (:i, :f, :n, :s, :o, 'open', :h, :p, "
                        ":t, :t)", {"i": run_id, "f": fp, "n": rel, "s": spec, "o": out_dir,
                                    "h": socket.gethostname(), "p": os.getpid(), "t": _now()})
                else:
                    run("DELETE FROM dpkit_budget_charges WHERE run_id = :r AND state = "
                        "'reserved'", {"r": run_id})
                    run("UPDATE dpkit_budget_runs SET pid = :p, host = :h, updated = :t WHERE id "
                        "= :r", {"p": os.getpid(), "h": socket.gethostname(), "t": _now(),
                                 "r": run_id})
                for cell, spends in new.items():
                    if spends is not None:
                        self._charge(run, run_id, cell, "reserved", spends)
                ids[fp] = run_id
        return ids

    def commit(self, run_id: int, cell: str, spends: list[dict[str, Any]]) -> None:
        """Charge ``cell`` what it actually spent (replacing its reservation)."""
        with self.backend.transaction(write=True) as run:
            run("DELETE FROM dpkit_budget_charges WHERE run_id = :r AND cell = :c",
                {"r": run_id, "c": cell})
            self._charge(run, run_id, cell, "spent", spends)

    def finish(self, run_id: int) -> str:
        """End a run: ``closed`` (all spent), ``released`` (nothing spent), else stays ``open``."""
        with self.backend.transaction(write=True) as run:
            counts = dict(run("SELECT state, COUNT(*) FROM dpkit_budget_charges WHERE run_id = :r "
                              "GROUP BY state", {"r": run_id}))
            state = ("released" if not counts.get("spent") else
                     "open" if counts.get("reserved") else "closed")
            if state == "released":
                run("DELETE FROM dpkit_budget_charges WHERE run_id = :r", {"r": run_id})
            run("UPDATE dpkit_budget_runs SET state = :s, updated = :t WHERE id = :r",
                {"s": state, "t": _now(), "r": run_id})
        return state

    def close(self, run_id: int) -> str:
        """Give back an open run's unspent reservations (its cells never ran) and end it."""
        with self.backend.transaction(write=True) as run:
            if not run("SELECT id FROM dpkit_budget_runs WHERE id = :r", {"r": run_id}):
                raise BudgetStoreError(f"no run {run_id} in the budget store {self.where}")
            run("DELETE FROM dpkit_budget_charges WHERE run_id = :r AND state = 'reserved'",
                {"r": run_id})
        return self.finish(run_id)

    # --------------------------------------------------------------- reading
    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset in the store with its cap."""
        with self.backend.transaction(write=False) as run:
            rows = run("SELECT fingerprint, neighboring, name, basis, cap_epsilon, cap_delta, "
                       "created FROM dpkit_budget_datasets ORDER BY created, name")
        keys = ("fingerprint", "neighboring", "name", "basis", "cap_epsilon", "cap_delta", "created")
        return [dict(zip(keys, r)) for r in rows]

    def runs(self, fingerprint: str, neighboring: str) -> list[dict[str, Any]]:
        """Every run charged to a dataset, oldest first, with its charges (cell, state, spends)."""
        with self.backend.transaction(write=False) as run:
            rows = run("SELECT id, spec, out_dir, state, host, pid, started, updated FROM "
                       "dpkit_budget_runs WHERE fingerprint = :f AND neighboring = :n ORDER BY id",
                       {"f": fingerprint, "n": neighboring})
            charges = run("SELECT c.run_id, c.cell, c.state, c.spends FROM dpkit_budget_charges c "
                          "JOIN dpkit_budget_runs r ON c.run_id = r.id WHERE r.fingerprint = :f "
                          "AND r.neighboring = :n ORDER BY c.run_id, c.cell",
                          {"f": fingerprint, "n": neighboring})
        keys = ("id", "spec", "out_dir", "state", "host", "pid", "started", "updated")
        out = [dict(zip(keys, r), charges=[]) for r in rows]
        by_id = {r["id"]: r for r in out}
        for run_id, cell, state, spends in charges:
            by_id[run_id]["charges"].append({"cell": cell, "state": state,
                                             "spends": json.loads(spends)})
        return out

    # --------------------------------------------------------------- helpers
    @staticmethod
    def _ensure_dataset(run: Run, dataset: DatasetId, neighboring: str) -> None:
        if not run("SELECT 1 FROM dpkit_budget_datasets WHERE fingerprint = :f AND neighboring = :n",
                   {"f": dataset.fingerprint, "n": neighboring}):
            run("INSERT INTO dpkit_budget_datasets VALUES (:f, :n, :name, :b, NULL, NULL, :t)",
                {"f": dataset.fingerprint, "n": neighboring, "name": dataset.name,
                 "b": dataset.basis, "t": _now()})

    @staticmethod
    def _charges(run: Run, fingerprint: str, neighboring: str,
                 skip_reserved_of: int | None = None) -> list[dict[str, Any]]:
        rows = run("SELECT c.run_id, c.state, c.spends FROM dpkit_budget_charges c JOIN "
                   "dpkit_budget_runs r ON c.run_id = r.id WHERE r.fingerprint = :f AND "
                   "r.neighboring = :n", {"f": fingerprint, "n": neighboring})
        return [s for run_id, state, spends in rows
                if not (run_id == skip_reserved_of and state == "reserved")
                for s in json.loads(spends)]

    @staticmethod
    def _charge(run: Run, run_id: int, cell: str, state: str, spends: list[dict[str, Any]]) -> None:
        run("INSERT INTO dpkit_budget_charges VALUES (:r, :c, :s, :j, :t)",
            {"r": run_id, "c": cell, "s": state, "j": json.dumps(spends, allow_nan=False),
             "t": _now()})

    @staticmethod
    def _admit(dataset: DatasetId, cap_eps: float, cap_delta: float, past: list, planned: list,
               filter_epsilon: Any, neighboring: str) -> None:
        from dpkit.accounting import guarantee_from_dict

        def pairs(spends: list) -> list:
            return [(guarantee_from_dict(s["guarantee"]), int(s["count"])) for s in spends]

        try:
            before = filter_epsilon(pairs(past), cap_delta, neighboring)
            after = filter_epsilon(pairs(past + planned), cap_delta, neighboring)
        except Exception as exc:  # noqa: BLE001 - anything the filter cannot bound is refused
            raise BudgetExceededError(f"{dataset.short} is capped at ε = {cap_eps:g} at δ = "
                                      f"{cap_delta:g}, and this run's spends cannot be counted "
                                      f"against it: {exc}; nothing was run") from None
        if not after <= cap_eps * (1 + CAP_TOLERANCE):
            raise BudgetExceededError(
                f"{dataset.short} is capped at ε = {cap_eps:g} at δ = {cap_delta:g} ({neighboring}); "
                f"its runs so far have spent ε = {before:.6g} (privacy filter) and this run's "
                f"planned spends would bring it to {after:.6g}; remaining ε = "
                f"{max(cap_eps - before, 0.0):.6g}; nothing was run (dpkit budget status shows "
                "every charge)")
