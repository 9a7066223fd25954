"""The store's history is hash-chained: every hand edit is found, named, and refused by status,
run and verify."""

import sqlite3
import sys
from pathlib import Path

import pytest

from dpkit.budget.chain import BrokenChainError
from dpkit.budget.store import BudgetStore
from dpkit.cli.main import main

sys.path.insert(0, str(Path(__file__).parent))
from store_worker import DATASET, plans, spends  # noqa: E402


@pytest.fixture
def history(tmp_path):
    """A store with a cap and a run that charged three cells; returns its path."""
    path = tmp_path / "s.sqlite"
    store = BudgetStore(path)
    store.set_cap(DATASET, epsilon=5.0, delta=1e-5)
    run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0), c=spends(1.0)), "w", "/o")
    for cell in "abc":
        store.charge(run_id, cell, spends(1.0)[0])
        store.end_cell(run_id, cell, "done")
    store.finish(run_id)
    return path


def edit(path, sql, *params):
    with sqlite3.connect(path) as conn:
        conn.execute(sql, params)


def seq_of(path, kind, nth=0):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT seq FROM dpkit_budget_log WHERE kind = ? ORDER BY seq",
                            (kind,)).fetchall()[nth][0]


def test_an_untouched_history_verifies(history, capsys):
    assert BudgetStore(history).verify()["entries"] == 10
    assert main(["budget", "verify", "--store", str(history)]) == 0
    assert "10 entries verify" in capsys.readouterr().out


@pytest.mark.parametrize("attack", ["null the cap", "delete a charge", "edit a charge",
                                    "delete the last entries", "drop records", "reorder"])
def test_a_hand_edit_is_detected_and_named(history, attack, capsys):
    cap, charge = seq_of(history, "cap"), seq_of(history, "charge", 1)
    if attack == "null the cap":
        edit(history, "UPDATE dpkit_budget_log SET body = replace(body, '\"epsilon\":5.0', "
                      "'\"epsilon\":null') WHERE seq = ?", cap)
        named = f"entry #{cap} (cap"
    elif attack == "delete a charge":
        edit(history, "DELETE FROM dpkit_budget_log WHERE seq = ?", charge)
        named = f"entry #{charge} is missing"
    elif attack == "edit a charge":
        edit(history, "UPDATE dpkit_budget_log SET body = replace(body, '\"count\":1', "
                      "'\"count\":0') WHERE seq = ?", charge)
        named = f"entry #{charge} (charge"
    elif attack == "delete the last entries":
        edit(history, "DELETE FROM dpkit_budget_log WHERE seq > ?", charge)
        named = "deleted from the end"
    elif attack == "drop records":  # so that an overlapping copy would no longer be linked
        edit(history, "DELETE FROM dpkit_budget_records WHERE rowid IN (SELECT rowid FROM "
                      "dpkit_budget_records LIMIT 10)")
        named = "stored records of corpus"
    else:  # swap two charges' bodies: each hash still matches nothing
        edit(history, "UPDATE dpkit_budget_log SET seq = -1 WHERE seq = ?", charge)
        edit(history, "UPDATE dpkit_budget_log SET seq = ? WHERE seq = ?", charge, charge + 2)
        edit(history, "UPDATE dpkit_budget_log SET seq = ? WHERE seq = -1", charge + 2)
        named = f"entry #{charge}"
    store = BudgetStore(history)
    with pytest.raises(BrokenChainError, match="does not verify") as info:
        store.verify()
    assert named in str(info.value)
    for command in (["budget", "verify"], ["budget", "status"]):
        assert main([*command, "--store", str(history)]) == 2
        assert named in capsys.readouterr().err
    if attack != "drop records":  # every write verifies the chain first
        with pytest.raises(BrokenChainError):
            store.reserve(plans(x=spends(0.1)), "w", "/x")


def test_a_kept_head_catches_a_rebuilt_history(history, tmp_path):
    head = BudgetStore(history).verify()["head"]
    other = tmp_path / "forged.sqlite"
    forged = BudgetStore(other)  # a whole new, self-consistent history without the charges
    forged.set_cap(DATASET, epsilon=5.0, delta=1e-5)
    forged.verify()
    with pytest.raises(BrokenChainError, match="no longer holds the head"):
        forged.verify(expect_head=head)
    assert BudgetStore(history).verify(expect_head=head)["head"] == head
