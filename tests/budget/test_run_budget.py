"""``dpkit run`` and the budget store: the six ways issue 42 passed a cap, each replayed.

Every replay ends refused before anything is released, or charged in full.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dpkit.base.errors import BudgetExceededError
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore
from dpkit.cli.main import main

sys.path.insert(0, os.path.dirname(__file__))
from helpers import plan_pairs, planned, run_path, spent, write_spec  # noqa: E402

from dpkit.budget.filter import filter_epsilon_by_relation  # noqa: E402

TOY = {"name": "toy_text", "params": {"n_docs": 16}}


def cap(registry, store, epsilon, data=TOY, relation="add_remove", **more):
    return store.set_cap(DatasetIds(registry)(data), relation, epsilon=epsilon, delta=1e-5, **more)


def test_a_run_is_charged_to_its_records(tmp_path, budget_plugins, private_budget_store):
    path = write_spec(tmp_path, etas="[0.01, 0.02, 0.04]")
    run_path(path)
    status = spent(BudgetStore(private_budget_store))
    assert status["fingerprint"].startswith("records:") and status["records"] == 16
    (run,) = status["runs"]
    assert (run["state"], run["charged_cells"], run["open_reservations"]) == ("closed", 3, 0)
    total = json.loads((tmp_path / "out-s" / "ledger.json").read_text())["total"]["groups"][0]
    assert total["fingerprint"] == status["fingerprint"]
    assert status["composed"]["add_remove"]["dp"]["epsilon"] == pytest.approx(
        total["release_every_cell"]["dp"]["epsilon"], rel=1e-12)


def test_way_1_another_relation_is_converted_or_refused(tmp_path, budget_plugins,
                                                        private_budget_store):
    """Cap in add/remove: a replace-one spec is refused with the reason (no valid conversion),
    leaving no output folder. Cap in replace-one: add/remove runs are charged converted."""
    store = BudgetStore(private_budget_store)
    one = planned(write_spec(tmp_path, "plain"))
    cap(budget_plugins, store, 5.5 * one)
    other = write_spec(tmp_path, "replace", privacy="privacy: {neighboring: replace_one}")
    with pytest.raises(BudgetExceededError, match="says nothing about adding or removing"):
        run_path(other)
    assert not (tmp_path / "out-replace").exists()
    alias = {"name": "toy_text_alias", "params": {"n_docs": 16}}
    replace_cap = 3.5 * one
    store.set_cap(DatasetIds(budget_plugins)(alias), "replace_one", epsilon=replace_cap,
                  delta=1e-5, raise_cap=True, reason="test: state the cap in replace-one")
    admitted = 0
    for i in range(5):
        try:
            run_path(write_spec(tmp_path, f"p{i}"))
            admitted += 1
        except BudgetExceededError:
            pass
    status = spent(store)
    assert status["totals"]["epsilon"] <= replace_cap * (1 + 1e-9)
    pairs = [(g, n) for g, n in plan_pairs(write_spec(tmp_path, "plain"))]

    def fits(k, relation):
        return filter_epsilon_by_relation({"add_remove": pairs * k}, 1e-5, relation) <= replace_cap

    converted = max(k for k in range(6) if fits(k, "replace_one"))
    assert admitted == converted >= 1
    assert max(k for k in range(6) if fits(k, "add_remove")) > converted  # the conversion costs


def test_way_2_a_cell_that_released_and_then_failed_is_charged(tmp_path, budget_plugins,
                                                                private_budget_store):
    store = BudgetStore(private_budget_store)
    cap(budget_plugins, store, 1e6)
    failing = write_spec(tmp_path, "fails", defense="toy_sends_then_fails", etas="[0.01, 0.02, 0.04]")
    outcome = run_path(failing, retries=1)
    assert len(outcome.failures) == 3 and not outcome.rows
    attack = write_spec(tmp_path, "attack", attacks="[{name: toy_failing_attack}]")
    assert len(run_path(attack).failures) == 1
    runs = spent(store)["runs"]
    assert [(r["state"], r["charged_cells"], r["charges"]) for r in runs] == [
        ("closed", 3, 6), ("closed", 1, 1)]  # every attempt of every cell, and the attack's cell


def test_way_3_close_refuses_a_live_run_and_settles_a_dead_one_as_spent(
        tmp_path, budget_plugins, private_budget_store, capsys):
    store = BudgetStore(private_budget_store)
    one = planned(write_spec(tmp_path, "plain"))
    cap(budget_plugins, store, 1.1 * one)  # one run fits, two do not
    slow = write_spec(tmp_path, "slow", defense="toy_noise")
    slow.write_text(slow.read_text().replace("params: {eta: 0.01}", "params: {eta: 0.01, sleep: 300}"))
    proc = subprocess.Popen([sys.executable, "-m", "dpkit", "run", str(slow), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not any(r.cells and any(c.charges for c in r.cells.values())
                      for r in store.state().runs.values()):
            assert time.time() < deadline and proc.poll() is None, "the slow run never charged"
            time.sleep(0.5)
        (run_id,) = store.state().runs
        assert main(["budget", "close", str(run_id)]) == 2
        assert "alive" in capsys.readouterr().err
        with pytest.raises(BudgetExceededError):  # its reservation still holds the budget
            run_path(write_spec(tmp_path, "second"))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert main(["budget", "close", str(run_id)]) == 0
    assert store.state().runs[run_id].state == "closed"  # it charged: settled as spent
    with pytest.raises(BudgetExceededError):
        run_path(write_spec(tmp_path, "third"))
    assert not (tmp_path / "out-third").exists()


def test_way_6_a_send_beyond_the_plan_is_refused_before_it_is_observed(
        tmp_path, budget_plugins, private_budget_store):
    store = BudgetStore(private_budget_store)
    path = write_spec(tmp_path, "more", defense="toy_sends_more")
    cap(budget_plugins, store, 10 * planned(path))
    outcome = run_path(path)
    ((_, error),) = outcome.failures
    assert "no guarantee" in error and "hidden_states" in error
    status = spent(store)
    assert status["totals"]["epsilon"] < 10 * planned(path)  # the ∞ spend was never recorded
    assert not status["composed"]["add_remove"].get("no_guarantee_reasons")


def test_the_wire_refuses_an_undeclared_send_before_the_server_sees_it(private_budget_store):
    import torch

    from dpkit.accounting import DpGuarantee, Ledger, NoGuarantee
    from dpkit.budget.fingerprint import dataset_id
    from dpkit.budget.store import CellPlan
    from dpkit.data.records import record_hashes
    from dpkit.release.wire import Release
    from dpkit.runner.budget import CellGuard
    from dpkit.testing.boundary import recording_wire

    corpus = dataset_id("c", record_hashes(["one", "two"]))
    store = BudgetStore(private_budget_store)
    store.set_cap(corpus, epsilon=2.0, delta=1e-5)
    plan = [{"label": "sum", "count": 1, "guarantee": {"kind": "dp", "event": {
        "name": "LaplaceDpEvent", "noise_multiplier": 1.0}}}]
    from dpkit.accounting import guarantee_to_dict

    plan[0]["guarantee"] = guarantee_to_dict(DpGuarantee.pure(1.0))
    run_id = store.reserve({"cell": CellPlan(corpus, "add_remove", plan)}, "w", "/o")
    wire, server = recording_wire(Release("sum", DpGuarantee.pure(1.0), "sum", count=1),
                                  ledger=Ledger(guard=CellGuard(store.location, run_id, "cell")))
    wire.send("sum", torch.ones(1))
    with pytest.raises(BudgetExceededError):
        wire.send("hidden_states", torch.ones(3))
    assert [m["name"] for m in server.got] == ["sum"]  # the refused send never crossed
    with pytest.raises(BudgetExceededError):  # what the wire records for units past a declaration
        wire.ledger.spend(NoGuarantee("2 units beyond the declaration"), "sum (over declaration)")
    assert [c["label"] for c in store.state().runs[run_id].cells["cell"].charges] == ["sum"]
