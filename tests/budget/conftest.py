"""A real PostgreSQL server for the budget store's tests, started from the distribution's packages.

The server is private to the test session: a fresh cluster in a temporary folder, reachable only
through a Unix socket there (no TCP port), stopped at the end. It needs PostgreSQL's server
binaries (Debian: ``apt-get install postgresql``) and a driver (``pip install 'psycopg[binary]'``);
without them the tests that use it are skipped, saying which is missing. ``$DPKIT_TEST_POSTGRES_URL``
points the tests at a server of your own instead (each test creates its own database there);
``$DPKIT_REQUIRE_POSTGRES=1`` (CI) turns the skip into a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

import dpkit.contract.plugins

HERE = Path(__file__).parent
PLUGINS = "toy=dpkit.testing.toy,budget_test=budget_plugins,datasets=dpkit_datasets"


def _binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def _as_server_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the ``postgres`` user then."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _unavailable(reason: str) -> None:
    """Skip, or fail where a server is required (CI sets ``DPKIT_REQUIRE_POSTGRES=1``)."""
    if os.environ.get("DPKIT_REQUIRE_POSTGRES"):
        pytest.fail(f"PostgreSQL is required here but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server():
    """(admin URL template, cleanup) of a private PostgreSQL server, or skip with the reason."""
    try:
        import psycopg  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError:
        _unavailable("no PostgreSQL driver: pip install sqlalchemy 'psycopg[binary]'")
    url = os.environ.get("DPKIT_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    bindir = _binaries()
    if bindir is None:
        _unavailable("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="dpkit-pg-"))
    data = root / "data"
    os.chmod(root, 0o777)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    init = subprocess.run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U",
                                           "postgres", "--auth=trust", "-E", "UTF8"]),
                          capture_output=True, text=True)
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"initdb failed: {init.stderr.strip()[-300:]}")
    options = f"-c listen_addresses='' -k {root} -p 5439 -c fsync=off"
    start = subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-o",
                                            options, "-l", str(root / "log"), "-w", "start"]),
                           capture_output=True, text=True)
    if start.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        yield f"postgresql://postgres@/{{db}}?host={root}&port=5439"
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                        "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """The URL of a fresh, empty database on the test server."""
    import sqlalchemy

    name = "dpkit_" + uuid.uuid4().hex[:12]
    template = postgres_server if "{db}" in postgres_server else None
    admin = template.format(db="postgres") if template else postgres_server
    engine = sqlalchemy.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    if template:
        return template.format(db=name)
    base, _, query = postgres_server.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")


@pytest.fixture
def budget_plugins(monkeypatch):
    """The toy plug-in and this folder's budget test plug-ins, alone."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(HERE))
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", PLUGINS)
    dpkit.contract.plugins.reset()
    yield dpkit.contract.plugins.get_registry()
    dpkit.contract.plugins.reset()


@pytest.fixture
def store(tmp_path):
    """An empty budget store on an SQLite file."""
    from dpkit.budget.store import BudgetStore

    return BudgetStore(tmp_path / "s.sqlite")
