"""``dpkit budget verify``, one check at a time: a record set edited without changing its size, a
dataset keyed by name (no records to check), and the head a user kept from an earlier verify."""

import sqlite3
import sys
from pathlib import Path

import pytest

from dpkit.budget.chain import GENESIS, BrokenChainError
from dpkit.budget.fingerprint import dataset_id
from dpkit.budget.store import BudgetStore

sys.path.insert(0, str(Path(__file__).parent))
from store_worker import DATASET, plans, spends  # noqa: E402


@pytest.fixture
def path(store):
    """The path of a store holding DATASET (50 records), a name-keyed dataset, a cap and a run."""
    store.set_cap(DATASET, epsilon=5.0, delta=1e-5)
    store.register(dataset_id("by name", None))
    store.reserve(plans(a=spends(1.0)), "w", "/o")
    return Path(store.location)


def test_a_whole_history_verifies_with_its_counts_and_head(path):
    report = BudgetStore(path).verify()
    with sqlite3.connect(path) as conn:
        seq, digest = conn.execute("SELECT seq, hash FROM dpkit_budget_log ORDER BY seq DESC"
                                   ).fetchone()
    assert report == {"entries": 4, "head": f"{seq}:{digest}", "datasets": 2, "runs": 1,
                      "caps": 1}
    assert seq == 4
    BudgetStore(path).state(deep=True)


def test_an_empty_store_verifies_at_the_genesis_head(tmp_path):
    assert BudgetStore(tmp_path / "e.sqlite").verify() == {
        "entries": 0, "head": "0:" + GENESIS, "datasets": 0, "runs": 0, "caps": 0}


def test_a_record_swapped_for_another_is_found_though_the_count_is_unchanged(path):
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE dpkit_budget_records SET record = 'f' || substr(record, 2) WHERE "
                     "rowid = (SELECT min(rowid) FROM dpkit_budget_records)")
    with pytest.raises(BrokenChainError, match=f"^the budget store {path} does not verify: "
                                               r"the stored records of corpus \(records:[0-9a-f]{8}"
                                               r"\) were edited: 50 of 50 left, or changed"):
        BudgetStore(path).verify()
    with pytest.raises(BrokenChainError, match="stored records of corpus"):
        BudgetStore(path).state(deep=True)
    BudgetStore(path).state()  # the shallow read does not look at the records


def test_a_dataset_whose_records_were_all_deleted_is_found(path):
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM dpkit_budget_records")
    with pytest.raises(BrokenChainError, match="were edited: 0 of 50 left"):
        BudgetStore(path).verify()


def test_a_kept_head_still_verifies_after_later_writes(path):
    head = BudgetStore(path).verify()["head"]
    BudgetStore(path).register(dataset_id("another name", DATASET.records))
    later = BudgetStore(path).verify(expect_head=head)
    assert later["entries"] == 5 and later["head"] != head
    first = "1:" + later["head"].split(":")[1]  # the last entry's hash at the first seq
    with pytest.raises(BrokenChainError, match=f"^the budget store {path} does not verify: the "
                                               f"history no longer holds the head {first} you "
                                               "kept: it was rewritten or cut"):
        BudgetStore(path).verify(expect_head=first)
    with sqlite3.connect(path) as conn:
        (digest,) = conn.execute("SELECT hash FROM dpkit_budget_log WHERE seq = 1").fetchone()
    BudgetStore(path).verify(expect_head=f"1:{digest}")  # the very first entry is a head too


def test_a_broken_chain_names_the_store(path):
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM dpkit_budget_log WHERE seq = 2")
    with pytest.raises(BrokenChainError, match=f"^the budget store {path} does not verify: "):
        BudgetStore(path).verify()


def test_records_edited_after_a_name_keyed_dataset_are_found(store):
    store.register(dataset_id("by name", None))
    store.register(DATASET)
    with sqlite3.connect(store.location) as conn:
        conn.execute("DELETE FROM dpkit_budget_records WHERE rowid = (SELECT min(rowid) FROM "
                     "dpkit_budget_records)")
    with pytest.raises(BrokenChainError, match="were edited: 49 of 50 left"):
        store.verify()


@pytest.mark.parametrize("head", ["9:{digest}", "0:{digest}", "x:{digest}", "-1:{digest}",
                                  "0:" + GENESIS])
def test_a_head_the_history_does_not_hold_is_refused(path, head):
    digest = BudgetStore(path).verify()["head"].split(":")[1]
    with pytest.raises(BrokenChainError, match="no longer holds the head"):
        BudgetStore(path).verify(expect_head=head.format(digest=digest))


def test_the_genesis_head_of_an_empty_store_is_not_a_head_to_keep(tmp_path):
    with pytest.raises(BrokenChainError, match="no longer holds the head"):
        BudgetStore(tmp_path / "e.sqlite").verify(expect_head="0:" + GENESIS)
