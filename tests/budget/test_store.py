"""The budget store: a run's life, write-ahead charges, caps, racing processes (SQLite and a real
PostgreSQL), kill -9, corrupt files, schema versions and the schema-1 migration."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.budget.schema import SCHEMA_VERSION
from dpkit.budget.store import BudgetStore

sys.path.insert(0, str(Path(__file__).parent))
from store_worker import DATASET, plans, spends  # noqa: E402

WORKER = str(Path(__file__).parent / "store_worker.py")
LOCATIONS = ["path", "sqlalchemy", "postgresql"]


@pytest.fixture(params=LOCATIONS)
def where(request, tmp_path):
    """A store location of each kind: an SQLite path, SQLite through SQLAlchemy, PostgreSQL."""
    if request.param == "sqlalchemy":
        pytest.importorskip("sqlalchemy")
        return f"sqlite:///{tmp_path / 's.sqlite'}"
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_url")
    return str(tmp_path / "s.sqlite")


def counted(store):
    (run_cells,) = [[c for r in store.state().runs.values() for c in r.cells.values()]]
    return sum(s["count"] for c in run_cells for s in c.counted())


def test_a_run_is_reserved_charged_and_settled(where):
    store = BudgetStore(where)
    run_id = store.reserve(plans(a=spends(1.0), b=spends(2.0)), "spec", "/out")
    store.charge(run_id, "a", spends(1.0)[0])  # matches its reservation
    store.end_cell(run_id, "a", "done")
    assert store.finish(run_id) == "closed"  # b never charged: its reservation is given back
    run = store.state().runs[run_id]
    assert run.cells["a"].ended == "done" and run.cells["b"].ended == "released"
    assert counted(store) == 1


def test_a_run_that_charged_nothing_is_released(where):
    store = BudgetStore(where)
    store.set_cap(DATASET, epsilon=3.0, delta=1e-5)
    run_id = store.reserve(plans(a=spends(3.0)), "spec", "/out")
    with pytest.raises(BudgetExceededError):
        store.reserve(plans(x=spends(1.0)), "spec", "/other")
    assert store.finish(run_id) == "released"
    store.reserve(plans(x=spends(1.0)), "spec", "/other")  # the budget is free again


def test_a_failed_cell_keeps_what_it_charged_and_each_retry_is_charged(where):
    store = BudgetStore(where)
    store.set_cap(DATASET, epsilon=2.5, delta=1e-5)
    run_id = store.reserve(plans(a=spends(1.0)), "spec", "/out")
    store.charge(run_id, "a", spends(1.0)[0], attempt=1)  # the first attempt declares, then fails
    store.charge(run_id, "a", spends(1.0)[0], attempt=2)  # the retry declares again: charged too
    with pytest.raises(BudgetExceededError, match="would bring it to 3"):
        store.charge(run_id, "a", spends(1.0)[0], attempt=3)
    store.end_cell(run_id, "a", "failed")
    assert store.finish(run_id) == "closed" and counted(store) == 2


def test_a_charge_beyond_the_reservation_is_refused_before_it_is_recorded(tmp_path):
    store = BudgetStore(tmp_path / "s.sqlite")
    store.set_cap(DATASET, epsilon=5.0, delta=1e-6)
    run_id = store.reserve(plans(a=spends(1.0, 3)), "first", "/one")
    with pytest.raises(BudgetExceededError, match=r"spent ε = 3 .*bring it to 6.*remaining ε = 2;"
                                                  r" nothing was released"):
        store.charge(run_id, "a", spends(3.0, label="more")[0])
    assert len(store.state().runs[run_id].cells["a"].charges) == 0  # the refusal left no trace
    with pytest.raises(BudgetStoreError, match="loosen"):
        store.set_cap(DATASET, epsilon=50.0, delta=1e-6)
    store.set_cap(DATASET, epsilon=4.0, delta=1e-6)  # lowering is always allowed
    with pytest.raises(BudgetStoreError, match="no planned spends"):
        store.reserve(plans(c=None), "unplanned", "/three")


def test_five_racing_processes_never_pass_the_cap(where, tmp_path):
    """(On an SQLite file and on PostgreSQL; SQLite through SQLAlchemy shares the file's lock.)
    Five processes reserve ε = 3 each against a cap of 10 at once: exactly three get in; then
    the three race to charge ε = 1 beyond their reservation with 1 left: exactly one gets in."""
    if where.startswith("sqlite:"):
        pytest.skip("the same SQLite lock as the plain path; raced there")
    BudgetStore(where).set_cap(DATASET, epsilon=10.0, delta=1e-5)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, WORKER, "race", where, str(go), f"/out{i}"],
                              stdout=subprocess.PIPE, text=True) for i in range(5)]
    assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 5
    go.touch()  # every process has imported dpkit and opened the store: they reserve at once
    first = [p.stdout.readline().split()[0] for p in procs]
    assert sorted(first) == ["ok"] * 3 + ["refused"] * 2
    store = BudgetStore(where)
    assert counted(store) == 9
    go.with_suffix(".2").touch()
    second = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert sorted(a for a in second if a) == ["ok"] + ["refused"] * 2
    assert counted(store) == 10
    store.verify()


def test_kill_holding_a_reservation_settles_as_spent_not_released(tmp_path):
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, WORKER, "hold", str(path), str(tmp_path / "held")],
                            stdout=subprocess.PIPE, text=True)
    word, run_id = proc.stdout.readline().split()
    assert word == "reserved"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = BudgetStore(path)
    store.set_cap(DATASET, epsilon=3.0, delta=1e-5)
    with pytest.raises(BudgetExceededError):  # the dead run's reservation still counts
        store.reserve(plans(x=spends(1.5)), "w", "/elsewhere")
    from dpkit.runner.budget import run_liveness

    assert store.close(int(run_id), run_liveness) == "closed"
    run = store.state().runs[int(run_id)]
    assert (run.cells["a"].ended, run.cells["b"].ended) == ("spent", "released")
    assert counted(store) == 1  # a's charge; b charged nothing, so its reservation is given back


def test_a_foreign_or_corrupt_file_is_refused_never_reset(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"these are not the bytes of a database" * 10)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    broken = tmp_path / "broken.sqlite"
    BudgetStore(broken).reserve(plans(a=spends(1.0)), "w", "/o")
    raw = bytearray(broken.read_bytes())
    raw[100:] = b"\xff" * (len(raw) - 100)
    broken.write_bytes(bytes(raw))
    for path, message in ((garbage, "not an SQLite database"), (foreign, "something else"),
                          (broken, "cannot be read")):
        before = path.read_bytes()
        with pytest.raises(BudgetStoreError, match=message) as info:
            BudgetStore(path)
        assert path.read_bytes() == before
        assert "never resets" in str(info.value) or "another file" in str(info.value)


def test_the_schema_is_versioned(tmp_path):
    path = tmp_path / "s.sqlite"
    BudgetStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM dpkit_budget_meta WHERE key = 'schema_version'"
                            ).fetchone() == (str(SCHEMA_VERSION),)
        conn.execute("UPDATE dpkit_budget_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(BudgetStoreError, match="newer dpkit"):
        BudgetStore(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE dpkit_budget_records")
    with pytest.raises(BudgetStoreError, match="incomplete"):
        BudgetStore(path)


V1 = (
    "CREATE TABLE dpkit_budget_meta (key VARCHAR(64) NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE dpkit_budget_datasets (fingerprint VARCHAR(200) NOT NULL, neighboring "
    "VARCHAR(32) NOT NULL, name TEXT NOT NULL, basis TEXT NOT NULL, cap_epsilon DOUBLE PRECISION, "
    "cap_delta DOUBLE PRECISION, created TEXT NOT NULL, PRIMARY KEY (fingerprint, neighboring))",
    "CREATE TABLE dpkit_budget_runs (id INTEGER NOT NULL PRIMARY KEY, fingerprint VARCHAR(200), "
    "neighboring VARCHAR(32), spec TEXT, out_dir TEXT, state VARCHAR(16), host TEXT, pid INTEGER, "
    "started TEXT, updated TEXT)",
    "CREATE TABLE dpkit_budget_charges (run_id INTEGER, cell VARCHAR(64), state VARCHAR(16), "
    "spends TEXT, updated TEXT, PRIMARY KEY (run_id, cell))",
)


def test_a_schema_1_store_is_migrated_keeping_its_caps_and_charges(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        for statement in V1:
            conn.execute(statement)
        conn.executemany("INSERT INTO dpkit_budget_meta VALUES (?, ?)",
                         [("format", "dpkit-budget-store"), ("schema_version", "1"), ("lock", "0")])
        conn.execute("INSERT INTO dpkit_budget_datasets VALUES ('sha256:old', 'add_remove', "
                     "'corpus', 'an old fingerprint', 3.0, 1e-5, 't')")
        conn.execute("INSERT INTO dpkit_budget_runs VALUES (1, 'sha256:old', 'add_remove', 'w', "
                     "'/o', 'open', 'h', 1, 't', 't')")
        for cell, state in (("a", "spent"), ("b", "reserved")):
            conn.execute("INSERT INTO dpkit_budget_charges VALUES (1, ?, ?, ?, 't')",
                         (cell, state, json.dumps(spends(1.0))))
    store = BudgetStore(path)
    store.verify()
    state = store.state()
    (legacy,) = [d for d in state.datasets.values() if d["legacy"]]
    assert state.caps[legacy["fingerprint"]].epsilon == 3.0
    # the new record-hashed corpus of the same name shares the old budget: 2 spent (the open
    # run's reservation counts as spent) + 1.5 would pass the carried-over cap of 3
    with pytest.raises(BudgetExceededError, match="spent ε = 2"):
        store.reserve(plans(x=spends(1.5)), "new", "/n")
