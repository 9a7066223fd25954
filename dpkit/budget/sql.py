"""Where the budget store lives: an SQLite file (standard library) or any SQLAlchemy URL.

Both give :meth:`transaction`, which yields a ``run(sql, params) -> rows`` function (a list of
parameter mappings inserts many rows at once). A write
transaction is serialised against every other writer before it reads anything — SQLite's
``BEGIN IMMEDIATE``; through SQLAlchemy, an update of the store's lock row, which takes a row
lock in PostgreSQL / MySQL and the write lock in SQLite — so a check-then-insert (reserve against
a cap) can never interleave with another. A corrupt or foreign file is refused, never reset.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpkit.base.errors import BudgetStoreError

Run = Callable[..., list[tuple]]
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 120.0
NOT_RESET = ("dpkit never resets a store (it would forget what was spent): restore it from a "
             "backup, or move it aside to start an empty one, knowing the spends it held are "
             "then no longer counted")


class SqliteBackend:
    """An SQLite file through the standard library (no extra dependency)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.where = str(self.path)
        if self.path.is_file() and self.path.stat().st_size > 0:
            with self.path.open("rb") as fh:
                head = fh.read(len(SQLITE_HEADER))
            if head != SQLITE_HEADER:
                raise BudgetStoreError(f"{self.path} is not a dpkit budget store: it is not an "
                                       f"SQLite database (first bytes {head[:8]!r}); {NOT_RESET}")
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def tables(self) -> set[str]:
        """Names of the tables in the database."""
        with self.transaction(write=False) as run:
            return {row[0] for row in run("SELECT name FROM sqlite_master WHERE type = 'table'")}

    @contextmanager
    def transaction(self, write: bool, lock: bool = True) -> Iterator[Run]:
        """A transaction (serialised against other writers when ``write``); commits on success."""
        try:
            conn = sqlite3.connect(self.where, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise BudgetStoreError(f"cannot open the budget store {self.where}: {exc}") from None
        try:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.DatabaseError as exc:
                raise self._corrupt(exc) from None

            def run(sql: str, params: Mapping[str, Any] | tuple | list = ()) -> list[tuple]:
                try:
                    if isinstance(params, list):  # many rows at once
                        conn.executemany(sql, params)
                        return []
                    return conn.execute(sql, params).fetchall()
                except sqlite3.DatabaseError as exc:
                    if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                        raise
                    raise self._corrupt(exc) from None

            yield run
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def _corrupt(self, exc: Exception) -> BudgetStoreError:
        return BudgetStoreError(f"the budget store {self.where} cannot be read ({exc}); "
                                f"{NOT_RESET}")


class SqlAlchemyBackend:
    """Any database SQLAlchemy reaches (``postgresql://…``, ``sqlite:///…``); ``pip install
    'dpkit[budget-sql]'``."""

    def __init__(self, url: str):
        try:
            import sqlalchemy
        except ImportError:
            raise BudgetStoreError(f"the budget store URL {url!r} needs SQLAlchemy: pip install "
                                   "'dpkit[budget-sql]' (a plain path uses SQLite with no extra "
                                   "package)") from None
        self._sa = sqlalchemy
        self.where = url.split("@")[-1] if "@" in url else url  # never print a password
        if url.startswith("postgresql://") and importlib.util.find_spec("psycopg") is not None:
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")  # psycopg 3
        connect_args = {"timeout": BUSY_TIMEOUT_S} if url.startswith("sqlite") else {}
        self.engine = sqlalchemy.create_engine(url, connect_args=connect_args,
                                               poolclass=sqlalchemy.pool.NullPool)

    def tables(self) -> set[str]:
        """Names of the tables in the database."""
        try:
            return set(self._sa.inspect(self.engine).get_table_names())
        except self._sa.exc.DBAPIError as exc:
            raise BudgetStoreError(f"cannot read the budget store {self.where}: {exc.orig}; "
                                   f"{NOT_RESET}") from None

    @contextmanager
    def transaction(self, write: bool, lock: bool = True) -> Iterator[Run]:
        """A transaction; a write one first updates the lock row (once the schema exists: ``lock``),
        which serialises writers."""
        sa = self._sa
        try:
            with self.engine.begin() as conn:
                def run(sql: str, params: Mapping[str, Any] | tuple | list = ()) -> list[tuple]:
                    if isinstance(params, list):  # many rows at once
                        if params:
                            conn.execute(sa.text(sql), params)
                        return []
                    result = conn.execute(sa.text(sql), dict(params) if params else {})
                    return [tuple(r) for r in result.fetchall()] if result.returns_rows else []

                if write and lock:
                    run("UPDATE dpkit_budget_meta SET value = value WHERE key = 'lock'")
                yield run
        except sa.exc.IntegrityError:
            raise
        except sa.exc.DBAPIError as exc:
            raise BudgetStoreError(f"the budget store {self.where} failed: {exc.orig}") from None
