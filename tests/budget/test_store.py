"""The budget store: a run's life, caps, concurrent reservations, kill -9, corrupt files, schema."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpkit.budget.schema import SCHEMA_VERSION
from dpkit.budget.store import BudgetStore, Request
from dpkit.base.errors import BudgetExceededError, BudgetStoreError

sys.path.insert(0, str(Path(__file__).parent))
from store_worker import DATASET, spends  # noqa: E402

WORKER = str(Path(__file__).parent / "store_worker.py")
LOCATIONS = ["path", "sqlalchemy"]


def location(kind: str, path: Path) -> str:
    if kind == "sqlalchemy":
        pytest.importorskip("sqlalchemy")
        return f"sqlite:///{path}"
    return str(path)


def request(cells: dict) -> list[Request]:
    return [Request(DATASET, "add_remove", cells)]


@pytest.mark.parametrize("kind", LOCATIONS)
def test_a_run_is_reserved_committed_and_closed(tmp_path, kind):
    store = BudgetStore(location(kind, tmp_path / "s.sqlite"))
    run_id = store.reserve(request({"a": spends(1.0), "b": spends(2.0)}), "spec", "/out")[
        DATASET.fingerprint]
    store.commit(run_id, "a", spends(0.5))
    assert store.finish(run_id) == "open"  # b never ran: its reservation is held for the resume
    again = store.reserve(request({"b": spends(2.0)}), "spec", "/out")[DATASET.fingerprint]
    assert again == run_id  # the same folder resumes the open run
    store.commit(run_id, "b", spends(2.0))
    assert store.finish(run_id) == "closed"
    (run,) = store.runs(DATASET.fingerprint, "add_remove")
    assert [(c["cell"], c["state"], c["spends"]) for c in run["charges"]] == [
        ("a", "spent", spends(0.5)), ("b", "spent", spends(2.0))]


@pytest.mark.parametrize("kind", LOCATIONS)
def test_a_run_that_spent_nothing_gives_its_reservation_back(tmp_path, kind):
    store = BudgetStore(location(kind, tmp_path / "s.sqlite"))
    store.set_cap(DATASET, "add_remove", 3.0, 1e-5)
    run_id = store.reserve(request({"a": spends(3.0)}), "spec", "/out")[DATASET.fingerprint]
    with pytest.raises(BudgetExceededError):
        store.reserve(request({"x": spends(1.0)}), "spec", "/other")
    assert store.finish(run_id) == "released"
    store.reserve(request({"x": spends(1.0)}), "spec", "/other")  # the budget is free again


def test_a_cap_refuses_what_would_pass_it_and_says_what_is_left(tmp_path):
    store = BudgetStore(tmp_path / "s.sqlite")
    store.set_cap(DATASET, "add_remove", 5.0, 1e-6)
    store.reserve(request({"a": spends(1.0, 3)}), "first", "/one")
    with pytest.raises(BudgetExceededError, match=r"spent ε = 3 .*bring it to 6.*remaining ε = 2;"
                                                  r" nothing was run"):
        store.reserve(request({"b": spends(1.0, 3)}), "second", "/two")
    assert len(store.runs(DATASET.fingerprint, "add_remove")) == 1  # the refusal left no trace
    with pytest.raises(BudgetStoreError, match="raise the cap"):
        store.set_cap(DATASET, "add_remove", 50.0, 1e-6)
    store.set_cap(DATASET, "add_remove", 4.0, 1e-6)  # lowering is always allowed
    with pytest.raises(BudgetStoreError, match="has no planned spends"):
        store.reserve(request({"c": None}), "unplanned", "/three")


@pytest.mark.parametrize("kind", LOCATIONS)
def test_concurrent_processes_never_overspend(tmp_path, kind):
    """Five processes race to reserve ε = 3 each against a cap of 10: exactly three get in."""
    where = location(kind, tmp_path / "s.sqlite")
    BudgetStore(where).set_cap(DATASET, "add_remove", 10.0, 1e-5)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, WORKER, "reserve", where, str(go), f"/out{i}",
                               "3", "1.0"], stdout=subprocess.PIPE, text=True) for i in range(5)]
    assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 5
    go.touch()  # every process has imported dpkit and opened the store: they reserve at once
    answers = [p.communicate(timeout=300)[0].split()[0] for p in procs]
    assert sorted(answers) == ["ok"] * 3 + ["refused"] * 2
    runs = BudgetStore(where).runs(DATASET.fingerprint, "add_remove")
    assert sum(s["count"] for r in runs for c in r["charges"] for s in c["spends"]) == 9


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def test_kill_between_reserve_and_commit_leaves_a_consistent_store(tmp_path):
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, WORKER, "hold", str(path), "/held"],
                            stdout=subprocess.PIPE, text=True)
    word, run_id = proc.stdout.readline().split()
    assert word == "reserved"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert integrity(path) == "ok"
    store = BudgetStore(path)
    (run,) = store.runs(DATASET.fingerprint, "add_remove")
    assert (run["id"], run["state"]) == (int(run_id), "open")
    assert [c["state"] for c in run["charges"]] == ["reserved", "reserved"]
    store.set_cap(DATASET, "add_remove", 3.0, 1e-5, force=True)
    with pytest.raises(BudgetExceededError):  # the dead run's reservation still counts
        store.reserve(request({"x": spends(1.5)}), "w", "/elsewhere")
    assert store.reserve(request({"a": spends(1.0)}), "w", "/held")[DATASET.fingerprint] == run["id"]


@pytest.mark.parametrize("delay", [0.3, 0.9])
def test_kill_during_commits_leaves_every_charge_whole(tmp_path, delay):
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, WORKER, "commits", str(path), "/busy"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("reserved")
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert integrity(path) == "ok"
    (run,) = BudgetStore(path).runs(DATASET.fingerprint, "add_remove")
    states = [c["state"] for c in run["charges"]]
    assert len(states) == 5000 and states.count("spent") > 0  # one row per cell, none lost
    assert all(c["spends"] == spends(0.01) for c in run["charges"])


def test_a_foreign_or_corrupt_file_is_refused_never_reset(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"these are not the bytes of a database" * 10)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    broken = tmp_path / "broken.sqlite"
    BudgetStore(broken).reserve(request({"a": spends(1.0)}), "w", "/o")
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
        conn.execute("DROP TABLE dpkit_budget_charges")
    with pytest.raises(BudgetStoreError, match="incomplete"):
        BudgetStore(path)


def test_the_status_record_is_json(tmp_path):
    from dpkit.budget.status import dataset_status, find_datasets

    store = BudgetStore(tmp_path / "s.sqlite")
    store.set_cap(DATASET, "add_remove", 10.0, 1e-5)
    run_id = store.reserve(request({"a": spends(2.0), "b": spends(1.0)}), "w", "/o")[
        DATASET.fingerprint]
    store.commit(run_id, "a", spends(2.0))
    (row,) = find_datasets(store, "corpus")
    status = dataset_status(store, row)
    assert status["filter_epsilon"] == 3.0  # pure spends: basic composition as the filter
    assert status["composed"]["dp"]["epsilon"] == 3.0
    assert status["delta_at"] == {"epsilon": 10.0, "delta": 0.0}
    assert [(r["spent_cells"], r["reserved_cells"]) for r in status["runs"]] == [(1, 1)]
    json.dumps(status, default=str)
    with pytest.raises(BudgetStoreError, match="no dataset 'other'"):
        find_datasets(store, "other")
