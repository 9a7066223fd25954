"""A run's acts in the budget store, one at a time: what a reservation records and refuses, what
each charge stores (matched or admitted by the caps), and how each way of ending settles what the
run reserved."""

import os
import socket
import sys
from pathlib import Path

import pytest

from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.budget.fingerprint import dataset_id
from dpkit.budget.store import CellPlan

sys.path.insert(0, str(Path(__file__).parent))
from helpers import docs, log  # noqa: E402
from store_worker import DATASET, plans, spends  # noqa: E402


# ------------------------------------------------------------------------------ reserving
def test_a_reservation_records_each_cell_its_process_and_numbers_runs_in_order(store):
    tail = dataset_id("tail", docs(40, 60))
    cells = {"a": CellPlan(DATASET, "add_remove", spends(1.0)),
             "b": CellPlan(tail, "replace_one", None)}
    assert store.reserve(cells, "spec.yaml", "/out") == 1
    body = log(store)[-1].body
    assert body == {"run": 1, "spec": "spec.yaml", "out_dir": "/out", "host": socket.gethostname(),
                    "pid": os.getpid(), "cells": {
                        "a": {"dataset": DATASET.fingerprint, "relation": "add_remove",
                              "spends": spends(1.0)},
                        "b": {"dataset": tail.fingerprint, "relation": "replace_one",
                              "spends": None}}}
    assert {e.body["id"] for e in log(store) if e.kind == "dataset"} == {DATASET.fingerprint,
                                                                       tail.fingerprint}
    assert store.reserve(plans(a=spends(1.0)), "spec.yaml", "/other") == 2


def test_a_reservation_is_all_or_none_and_counts_every_cell(store):
    store.set_cap(DATASET, epsilon=2.5, delta=1e-5)
    with pytest.raises(BudgetExceededError, match="bring it to 3"):  # each fits alone
        store.reserve(plans(a=spends(1.0), b=spends(1.0), c=spends(1.0)), "w", "/o")
    assert store.state().runs == {}
    tail = dataset_id("tail", docs(40, 60))
    with pytest.raises(BudgetExceededError):  # the new dataset's cell counts against its overlap
        store.reserve({"a": CellPlan(DATASET, "add_remove", spends(2.0)),
                       "b": CellPlan(tail, "add_remove", spends(1.0))}, "w", "/o")
    assert tail.fingerprint not in store.state().datasets  # nothing of the refusal was written
    store.reserve(plans(a=spends(1.0), b=spends(1.0)), "w", "/o")


def test_a_cell_reserves_in_its_own_relation(store):
    store.set_cap(DATASET, epsilon=5.0, delta=1e-5)  # add/remove
    with pytest.raises(BudgetExceededError, match="replace_one"):
        store.reserve({"a": CellPlan(DATASET, "replace_one", spends(1.0))}, "w", "/o")
    store.reserve({"a": CellPlan(DATASET, "add_remove", spends(1.0))}, "w", "/o")


def test_an_unplanned_cell_reading_a_capped_datasets_records_is_refused_naming_it(store):
    store.reserve({"a": CellPlan(DATASET, "add_remove", None)}, "w", "/o")  # uncapped: fine
    store.set_cap(DATASET, epsilon=5.0, delta=1e-5)
    tail = dataset_id("tail", docs(40, 60))
    with pytest.raises(BudgetStoreError, match=r"cell b reads records of a capped dataset "
                                               r"\(corpus\) but has no planned spends"):
        store.reserve({"a": CellPlan(tail, "add_remove", spends(1.0)),
                       "b": CellPlan(tail, "add_remove", None)}, "w", "/o")
    assert len(store.state().runs) == 1


def test_a_dead_run_of_the_folder_on_this_host_is_settled_before_reserving(store):
    first = store.reserve(plans(a=spends(1.0)), "w", "/o")
    store.charge(first, "a", spends(1.0)[0])
    other = store.reserve(plans(a=spends(1.0)), "w", "/elsewhere")
    later = store.reserve(plans(a=spends(1.0)), "w", "/o")  # not dead_here: the first stays open
    assert store.state().runs[first].state == "open"
    store.reserve(plans(a=spends(1.0)), "w", "/o", dead_here=True)
    runs = store.state().runs
    assert (runs[first].state, runs[first].settled_by) == ("closed", "takeover")
    assert (runs[later].state, runs[later].settled_by) == ("released", "takeover")
    assert runs[other].state == "open"
    assert runs[first].cells["a"].ended == "spent"


def test_take_over_settles_only_this_hosts_open_runs_of_the_folder(store, monkeypatch):
    done = store.reserve(plans(a=spends(1.0)), "w", "/o")
    store.finish(done)
    mine = store.reserve(plans(a=spends(1.0)), "w", "/o")
    monkeypatch.setattr(socket, "gethostname", lambda: "another-host")
    theirs = store.reserve(plans(a=spends(1.0)), "w", "/o")
    monkeypatch.undo()
    assert store.take_over("/o") == [mine]
    runs = store.state().runs
    assert runs[theirs].state == "open" and runs[done].settled_by == "finish"
    assert store.take_over("/o") == []


# -------------------------------------------------------------------------------- charging
def test_a_planned_charge_is_recorded_as_matched_without_asking_the_cap(store):
    run_id = store.reserve(plans(a=spends(1.0, 3)), "w", "/o")
    store.set_cap(DATASET, epsilon=0.5, delta=1e-5)  # tightened below the reservation
    store.charge(run_id, "a", spends(1.0, 3)[0], attempt=2)  # its reservation covers it
    assert log(store)[-1].body == {"run": run_id, "cell": "a", "attempt": 2,
                                   "spend": spends(1.0, 3)[0], "matched": True}
    with pytest.raises(BudgetExceededError, match=r"and cell a's spend 'release' \(×3, not in its "
                                                  r"reservation\) would bring it to"):
        store.charge(run_id, "a", spends(1.0, 3)[0])  # the reservation is used up
    assert store.state().runs[run_id].cells["a"].charges == spends(1.0, 3)


def test_an_unplanned_charge_that_fits_is_recorded_as_unmatched(store):
    run_id = store.reserve(plans(a=spends(1.0)), "w", "/o")
    store.charge(run_id, "a", spends(0.5, label="more")[0])
    body = log(store)[-1].body
    assert body["matched"] is False and body["attempt"] == 1
    cell = store.state().runs[run_id].cells["a"]
    assert cell.charges == spends(0.5, label="more") and cell.unmatched == spends(1.0)


def test_only_an_open_cell_of_a_known_run_can_be_charged(store):
    run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0)), "w", "/o")
    with pytest.raises(BudgetStoreError, match="no cell c of run 1"):
        store.charge(run_id, "c", spends(1.0)[0])
    with pytest.raises(BudgetStoreError, match="no cell a of run 9"):
        store.charge(9, "a", spends(1.0)[0])
    store.end_cell(run_id, "a", "done")
    with pytest.raises(BudgetStoreError, match="cell a was already settled"):
        store.charge(run_id, "a", spends(1.0)[0])
    with pytest.raises(BudgetStoreError, match="already settled"):
        store.end_cell(run_id, "a", "failed")
    store.charge(run_id, "b", spends(1.0)[0])
    store.finish(run_id)
    with pytest.raises(BudgetStoreError, match=r"cell b was already settled \(closed\)"):
        store.charge(run_id, "b", spends(1.0)[0])


# --------------------------------------------------------------------------------- ending
def test_an_unguarded_cell_is_charged_its_ledger_late_and_a_guarded_one_is_not(store):
    run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0)), "w", "/o")
    recorded = spends(1.0) + spends(0.25, 2, label="extra")
    store.end_cell(run_id, "a", "done", recorded)
    late = [e.body for e in log(store)[-3:-1]]
    assert late == [{"run": run_id, "cell": "a", "attempt": 0, "spend": s, "matched": False,
                     "late": True} for s in recorded]
    assert log(store)[-1].body == {"run": run_id, "cell": "a", "outcome": "done"}
    store.charge(run_id, "b", spends(1.0)[0])
    store.end_cell(run_id, "b", "failed", recorded)  # its guard charged: nothing more
    cells = store.state().runs[run_id].cells
    assert cells["a"].charges == recorded and cells["b"].charges == spends(1.0)
    assert cells["b"].ended == "failed"


def test_finishing_settles_each_unended_cell_by_whether_it_charged(store):
    run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0), c=spends(1.0)), "w", "/o")
    store.end_cell(run_id, "a", "done")  # charged nothing, ended
    store.charge(run_id, "b", spends(1.0)[0])
    assert store.finish(run_id) == "closed"
    assert log(store)[-1].body == {"run": run_id, "by": "finish",
                                   "cells": {"b": "spent", "c": "released"}, "state": "closed"}
    entries = len(log(store))
    assert store.finish(run_id) == "closed" and len(log(store)) == entries  # settled once


def test_a_run_whose_only_charge_came_from_an_ended_cell_is_closed(store):
    run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0)), "w", "/o")
    store.charge(run_id, "a", spends(1.0)[0])
    store.end_cell(run_id, "a", "done")
    assert store.finish(run_id) == "closed"


def test_closing_a_dead_run_asks_whether_it_lives(store):
    with pytest.raises(BudgetStoreError, match="no run 1 in the budget store"):
        store.close(1, lambda run: None)
    run_id = store.reserve(plans(a=spends(1.0)), "w", "/o")
    seen = []
    with pytest.raises(BudgetStoreError, match="run 1 is not closed: pid 7 is alive"):
        store.close(run_id, lambda run: seen.append(run.id) or "pid 7 is alive")
    assert seen == [run_id] and store.state().runs[run_id].state == "open"
    assert store.close(run_id, lambda run: None) == "released"
    assert store.state().runs[run_id].settled_by == "close"
    assert store.close(run_id, lambda run: "never asked") == "released"
