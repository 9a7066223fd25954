"""The budget store's schema (versioned) and its checks when a store is opened.

A new store is created; a store of this schema version is used; a schema-1 store (tables per
dataset, run and charge, no history) is migrated in place into the hash-chained log
(:mod:`dpkit.budget.migrate`); a newer version, a foreign database (an SQLite file with other
tables) or a half-made store is refused with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpkit.budget.sql import NOT_RESET, SqlAlchemyBackend, SqliteBackend
from dpkit.base.errors import BudgetStoreError

FORMAT = "dpkit-budget-store"
SCHEMA_VERSION = 2
TABLES = ("dpkit_budget_meta", "dpkit_budget_log", "dpkit_budget_records")
CREATE = (
    "CREATE TABLE IF NOT EXISTS dpkit_budget_meta (key VARCHAR(64) NOT NULL PRIMARY KEY, "
    "value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpkit_budget_log (seq INTEGER NOT NULL PRIMARY KEY, kind "
    "VARCHAR(16) NOT NULL, body TEXT NOT NULL, prev VARCHAR(64) NOT NULL, hash VARCHAR(64) NOT "
    "NULL, at VARCHAR(32) NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dpkit_budget_records (dataset VARCHAR(80) NOT NULL, record "
    "VARCHAR(32) NOT NULL, PRIMARY KEY (dataset, record))",
)
META = {"format": FORMAT, "schema_version": str(SCHEMA_VERSION), "lock": "0",
        "head": "0:" + "0" * 64}
V1_TABLES = ("dpkit_budget_datasets", "dpkit_budget_runs", "dpkit_budget_charges")


def open_backend(location: str) -> Any:
    """The backend for ``location`` (an SQLAlchemy URL with ``://``, else an SQLite path), with
    its schema created or checked."""
    backend: Any
    if "://" in location:
        backend = SqlAlchemyBackend(location)
    else:
        backend = SqliteBackend(Path(location).expanduser())
    tables = backend.tables()
    ours = {t for t in tables if t.startswith("dpkit_budget_")}
    if not ours:
        if isinstance(backend, SqliteBackend) and tables:
            raise BudgetStoreError(f"{backend.where} is an SQLite database of something else (tables "
                                   f"{', '.join(sorted(tables)[:5])}), not a dpkit budget store; "
                                   f"point {_ENV} at another file")
        _create(backend)
    elif set(V1_TABLES) <= ours and "dpkit_budget_log" not in ours:
        from dpkit.budget.migrate import migrate_v1

        migrate_v1(backend, CREATE, META)
    elif set(TABLES) - ours:
        raise BudgetStoreError(f"{backend.where} is an incomplete dpkit budget store (missing "
                               f"{', '.join(sorted(set(TABLES) - ours))}); {NOT_RESET}")
    _check_version(backend)
    return backend


_ENV = "DPKIT_BUDGET_STORE"


def _create(backend: Any) -> None:
    with backend.transaction(write=True, lock=False) as run:
        for statement in CREATE:
            run(statement)
        for key, value in META.items():
            if not run("SELECT 1 FROM dpkit_budget_meta WHERE key = :k", {"k": key}):
                run("INSERT INTO dpkit_budget_meta VALUES (:k, :v)", {"k": key, "v": value})


def _check_version(backend: Any) -> None:
    with backend.transaction(write=False) as run:
        meta = dict(run("SELECT key, value FROM dpkit_budget_meta"))
    if meta.get("format") != FORMAT:
        raise BudgetStoreError(f"{backend.where} is not a dpkit budget store (format "
                               f"{meta.get('format')!r}); {NOT_RESET}")
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise BudgetStoreError(f"{backend.where}: unreadable schema version "
                               f"{meta.get('schema_version')!r}; {NOT_RESET}") from None
    if version > SCHEMA_VERSION:
        raise BudgetStoreError(f"{backend.where} was written by a newer dpkit (schema version "
                               f"{version}; this dpkit reads {SCHEMA_VERSION}): upgrade dpkit")
    if version < SCHEMA_VERSION:  # schema 1 is migrated in open_backend
        raise BudgetStoreError(f"{backend.where}: schema version {version} has no migration to "
                               f"{SCHEMA_VERSION}")
