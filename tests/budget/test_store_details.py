"""The budget store's records, one act at a time: which records a spend is charged to (a dataset's
records and overlaps, the caps it reaches), what each write stores, and how writes are serialised
(the run's acts: test_store_runs.py)."""

import socket
import sqlite3
import sys
from pathlib import Path

import pytest

from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.budget import chain
from dpkit.budget.chain import BrokenChainError
from dpkit.budget.fingerprint import dataset_id
from dpkit.budget.store import BudgetStore

sys.path.insert(0, str(Path(__file__).parent))
from helpers import docs, log  # noqa: E402
from store_worker import DATASET, plans, spends  # noqa: E402


# ------------------------------------------------------------------------------- datasets
def test_a_known_dataset_is_written_once_and_each_new_name_once(store):
    store.register(DATASET)
    store.register(DATASET)
    assert [e.kind for e in log(store)] == ["dataset"]
    renamed = dataset_id("renamed copy", DATASET.records)
    store.register(renamed)
    store.register(renamed)
    kinds_bodies = [(e.kind, e.body) for e in log(store)]
    assert kinds_bodies[1:] == [("alias", {"id": DATASET.fingerprint, "name": "renamed copy",
                                           "basis": renamed.basis})]
    assert store.state().datasets[DATASET.fingerprint]["names"] == ["corpus", "renamed copy"]


def test_a_dataset_is_linked_to_each_stored_one_by_the_records_they_share(store):
    store.register(DATASET)  # documents 0–49
    disjoint = dataset_id("disjoint", docs(100, 130))
    store.register(disjoint)
    tail = dataset_id("tail", docs(40, 60))  # shares 40–49 with DATASET, nothing with disjoint
    store.register(tail)
    body = log(store)[-1].body
    assert body == {"id": tail.fingerprint, "name": "tail", "basis": tail.basis, "records": 20,
                    "overlaps": {DATASET.fingerprint: 10}}
    state = store.state(deep=True)  # every stored record set still hashes to its fingerprint
    assert state.overlaps[DATASET.fingerprint] == {tail.fingerprint: 10}
    assert state.overlaps[disjoint.fingerprint] == {}
    assert state.datasets[disjoint.fingerprint]["records"] == 30


def test_a_dataset_known_only_by_name_stores_no_records_and_links_to_none(store):
    store.register(DATASET)
    named = dataset_id("corpus", None)
    store.register(named)
    assert log(store)[-1].body == {"id": "name:corpus", "name": "corpus", "basis": named.basis,
                                   "records": 0, "overlaps": {}}
    store.state(deep=True)


def test_the_capped_datasets_a_dataset_reaches_stored_or_not(store):
    store.register(DATASET)
    tail = dataset_id("tail", docs(40, 60))
    store.register(tail)
    assert store.capped_links(tail) == [] and store.capped_links(DATASET) == []
    store.set_cap(DATASET, epsilon=1.0, delta=1e-5)
    assert store.capped_links(tail) == [DATASET.fingerprint]  # stored: through its overlap
    assert store.capped_links(DATASET) == [DATASET.fingerprint]
    entries = len(log(store))
    assert store.capped_links(dataset_id("head", docs(0, 5))) == [DATASET.fingerprint]  # not stored
    assert store.capped_links(dataset_id("new", docs(200, 210))) == []
    assert store.capped_links(dataset_id("corpus", None)) == []
    assert len(log(store)) == entries  # asking registers nothing


def test_a_new_dataset_reaches_a_records_cap_set_after_a_name_keyed_one(store):
    store.set_cap(dataset_id("by name", None), epsilon=1.0, delta=1e-5)  # no records to compare
    store.set_cap(DATASET, epsilon=1.0, delta=1e-5)
    assert store.capped_links(dataset_id("head", docs(0, 5))) == [DATASET.fingerprint]


def test_every_refusal_and_broken_history_names_the_store(store, tmp_path):
    where = str(tmp_path / "s.sqlite")
    store.set_cap(DATASET, epsilon=1.5, delta=1e-5)
    run_id = store.reserve(plans(a=spends(1.0)), "w", "/o")
    with pytest.raises(BudgetExceededError, match=f"store {where}\\)$"):
        store.reserve(plans(b=spends(1.0)), "w", "/p")
    with pytest.raises(BudgetExceededError, match=r"and cell a's spend 'more' \(×1, not in its "
                                                  r"reservation\) would bring it to 2;.*"
                                                  f"store {where}\\)$"):
        store.charge(run_id, "a", spends(1.0, label="more")[0])
    with sqlite3.connect(where) as conn:
        conn.execute("DELETE FROM dpkit_budget_records WHERE rowid = (SELECT min(rowid) FROM "
                     "dpkit_budget_records)")
    with pytest.raises(BrokenChainError, match=f"^the budget store {where} does not verify: the "
                                               "stored records of corpus"):
        store.state(deep=True)
    store.state()  # a plain read replays the log alone
    with sqlite3.connect(where) as conn:
        conn.execute("DELETE FROM dpkit_budget_log WHERE seq = 2")
    with pytest.raises(BrokenChainError, match=f"^the budget store {where} does not verify"):
        store.state()
    with pytest.raises(BrokenChainError, match=f"^the budget store {where} does not verify"):
        store.register(dataset_id("tail", docs(40, 60)))  # every write verifies first


# ----------------------------------------------------------------------------------- caps
def test_a_cap_registers_its_dataset_and_is_recorded_with_its_author(store):
    said = store.set_cap(DATASET, "replace_one", epsilon=2.0, delta=1e-6, reason="first")
    assert isinstance(said, dict)
    dataset, cap = log(store)
    assert dataset.kind == "dataset" and dataset.body["records"] == 50
    assert cap.kind == "cap" and cap.body["id"] == DATASET.fingerprint
    assert cap.body["relation"] == "replace_one" and cap.body["epsilon"] == 2.0
    assert cap.body["by"].endswith("@" + socket.gethostname())


def test_a_cap_records_every_notion_and_why_and_is_raised_only_when_asked(store):
    store.set_cap(DATASET, epsilon=2.0, delta=1e-6, eta=3.0, anonymity_epsilon=1.5)
    cap = store.state().caps[DATASET.fingerprint]
    assert (cap.epsilon, cap.delta, cap.eta, cap.anonymity_epsilon) == (2.0, 1e-6, 3.0, 1.5)
    assert log(store)[-1].body["reason"] == ""
    with pytest.raises(BudgetStoreError, match="loosen"):
        store.set_cap(DATASET, eta=4.0, reason="more tokens")
    store.set_cap(DATASET, eta=4.0, raise_cap=True, reason="more tokens")
    assert store.state().caps[DATASET.fingerprint].eta == 4.0
    assert log(store)[-1].body["reason"] == "more tokens"


def test_lifting_a_cap_needs_a_reason_and_keeps_its_relation(store):
    with pytest.raises(BudgetStoreError, match="has no cap to lift"):
        store.lift_cap(DATASET, "no cap yet")
    store.set_cap(DATASET, "replace_one", epsilon=2.0, delta=1e-6)
    with pytest.raises(BudgetStoreError, match=r"^lifting a cap needs a reason \(--reason\), kept "
                                               r"in the history$"):
        store.lift_cap(DATASET, "  ")
    assert DATASET.fingerprint in store.state().caps
    store.lift_cap(DATASET, "the study ended")
    lift = log(store)[-1].body
    assert lift["act"] == "lift" and lift["relation"] == "replace_one"
    assert lift["reason"] == "the study ended" and "@" in lift["by"]
    assert store.state().caps == {}


def test_a_failed_write_leaves_the_store_as_it_was(store):
    store.register(DATASET)
    with pytest.raises(RuntimeError):
        with store._writing() as (run, entries, state):
            chain.append(run, entries, "alias", {"id": DATASET.fingerprint, "name": "x",
                                                 "basis": ""})
            raise RuntimeError("interrupted")
    assert [e.kind for e in log(store)] == ["dataset"]
    store.verify()


def test_a_write_waits_for_the_write_under_way_then_appends_after_it(store, tmp_path):
    """Each act reads the log and appends in one transaction that holds off other writers: a
    second store's write waits for the first to commit instead of acting on a stale history."""
    import threading
    import time

    store.register(DATASET)
    other = BudgetStore(tmp_path / "s.sqlite")
    failed: list[BaseException] = []

    def second() -> None:
        try:
            other.register(dataset_id("tail", docs(40, 60)))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failed.append(exc)

    with store._writing() as (run, entries, state):
        chain.append(run, entries, "alias", {"id": DATASET.fingerprint, "name": "x", "basis": ""})
        waiting = threading.Thread(target=second)
        waiting.start()
        time.sleep(0.3)
        assert waiting.is_alive()  # held off while this write is open
    waiting.join(timeout=30)
    assert failed == [] and [e.kind for e in log(store)] == ["dataset", "alias", "dataset"]
    assert log(store)[-1].body["overlaps"] == {DATASET.fingerprint: 10}
    store.verify()
