"""Schema 1 → 2: a store of per-dataset tables becomes the hash-chained log, nothing forgotten.

Schema 1 keyed a dataset by a file or artifact fingerprint, without record hashes. Each of its
(fingerprint, relation) rows becomes a *legacy* dataset that the new store links by name to every
record set later reached under the same name (a hub dataset; a local file read under a generic
name): over-counts, never under-counts. Its cap is carried over; every run becomes a closed run whose charges are its
spent cells plus, for a run still open, its reservations (settled as spent: the process that held
them is not known to be gone). The schema-1 tables are left in place, unread.
"""

from __future__ import annotations

import json
from typing import Any

from dpkit.budget import chain


def migrate_v1(backend: Any, create: tuple[str, ...], meta: dict[str, str]) -> None:
    """Migrate the schema-1 store behind ``backend`` in one transaction."""
    with backend.transaction(write=True, lock=False) as run:
        for statement in create:
            run(statement)
        run("UPDATE dpkit_budget_meta SET value = :v WHERE key = 'schema_version'",
            {"v": meta["schema_version"]})
        if not run("SELECT 1 FROM dpkit_budget_meta WHERE key = 'head'"):
            run("INSERT INTO dpkit_budget_meta VALUES ('head', :v)", {"v": meta["head"]})
        entries: list = []
        ids: dict[tuple[str, str], str] = {}
        for fp, rel, name, basis, cap_eps, cap_delta, _ in run(
                "SELECT fingerprint, neighboring, name, basis, cap_epsilon, cap_delta, created FROM "
                "dpkit_budget_datasets ORDER BY created, name"):
            legacy = f"legacy:{fp}:{rel}"
            ids[(fp, rel)] = legacy
            chain.append(run, entries, "dataset", {
                "id": legacy, "name": name, "basis": f"schema-1 store ({basis}); linked to every "
                "dataset reached under this name", "records": 0, "overlaps": {}, "legacy": True})
            if cap_eps is not None:
                chain.append(run, entries, "cap", {
                    "id": legacy, "act": "set", "relation": rel, "epsilon": cap_eps,
                    "delta": cap_delta, "eta": None, "anonymity_epsilon": None,
                    "reason": "carried over from the schema-1 store", "by": "migration"})
        charges: dict[int, dict[str, Any]] = {}
        for run_id, cell, _state, spends in run("SELECT run_id, cell, state, spends FROM "
                                                "dpkit_budget_charges ORDER BY run_id, cell"):
            charges.setdefault(run_id, {})[cell] = json.loads(spends)
        for run_id, fp, rel, spec, out_dir, _state in run(
                "SELECT id, fingerprint, neighboring, spec, out_dir, state FROM dpkit_budget_runs "
                "ORDER BY id"):
            cells = {cell: {"dataset": ids[(fp, rel)], "relation": rel, "spends": spends}
                     for cell, spends in charges.get(run_id, {}).items()}
            chain.append(run, entries, "migrated", {"run": run_id, "spec": spec,
                                                    "out_dir": out_dir, "cells": cells})
