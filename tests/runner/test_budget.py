"""What one ``dpkit run`` charges: each attempt's spends before they are recorded, a finished or
failed cell's charges kept, the plan of every cell reading a capped dataset reserved first."""

import re
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import dpkit.contract.plugins
from dpkit.accounting import DpGuarantee, Ledger, guarantee_to_dict
from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.budget import chain
from dpkit.contract.component import Component
from dpkit.contract.context import clear_loaded
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore, CellPlan
from dpkit.runner.budget import CellGuard, RunBudget, reserve_run

sys.path.insert(0, str(Path(__file__).parents[1] / "budget"))
from helpers import plan_pairs, write_spec  # noqa: E402

TOY = {"name": "toy_text", "params": {"n_docs": 16}}


def pure(epsilon, count=1, label="release"):
    return {"label": label, "count": count, "guarantee": guarantee_to_dict(DpGuarantee.pure(epsilon))}


def logged(store, kind):
    with store.backend.transaction(write=False) as run:
        return [e.body for e in chain.read_log(run, store.where) if e.kind == kind]


@pytest.fixture
def opened(toy_plugins, private_budget_store):
    """A store capping the toy corpus at ε = 3 and a run of one cell reserving ε = 1 twice."""
    store = BudgetStore(private_budget_store)
    dataset = DatasetIds(toy_plugins)(TOY)
    store.set_cap(dataset, epsilon=3.0, delta=1e-5)
    run_id = store.reserve({"c": CellPlan(dataset, "add_remove", [pure(1.0), pure(1.0, label="b")])},
                           "spec", "/out")
    return store, run_id


def test_each_attempt_is_charged_before_its_ledger_records_the_spend(opened):
    store, run_id = opened
    budget = RunBudget(store, run_id)
    guard = budget.guard_for(SimpleNamespace(key="c"), 2)
    assert guard == CellGuard(store.location, run_id, "c", 2)
    ledger = Ledger(guard=guard)
    ledger.spend(DpGuarantee.pure(1.0), "release")
    with pytest.raises(BudgetExceededError, match="would bring it to 4"):  # 1 reserved + 1 + 2
        ledger.spend(DpGuarantee.pure(1.0), "more", count=2)
    assert [s.label for s in ledger.spends] == ["release"]  # refused before it was recorded
    assert [(c["run"], c["cell"], c["attempt"], c["spend"]) for c in logged(store, "charge")] == [
        (run_id, "c", 2, pure(1.0))]


def test_a_cell_that_charged_then_failed_keeps_its_charges_and_gives_back_the_rest(opened):
    store, run_id = opened
    budget = RunBudget(store, run_id)
    budget.guard_for(SimpleNamespace(key="c"), 1)(SimpleNamespace(
        label="release", count=1, guarantee=DpGuarantee.pure(1.0)))
    budget.fail("c")
    cell = store.state().runs[run_id].cells["c"]
    assert cell.ended == "failed" and cell.counted() == [pure(1.0)]  # "b" was never released
    budget.finish()
    assert store.state().runs[run_id].state == "closed"


def test_a_finished_cell_that_ran_unguarded_is_charged_what_its_ledger_recorded(opened):
    store, run_id = opened
    recorded = [pure(1.0), pure(0.5, 2, "late")]
    RunBudget(store, run_id).commit("c", SimpleNamespace(ledger={"spends": recorded}))
    cell = store.state().runs[run_id].cells["c"]
    assert cell.ended == "done" and cell.counted() == recorded


@pytest.mark.parametrize("store_on, run_on", [(False, False), (True, False), (False, True)])
def test_without_a_store_run_nothing_is_guarded_or_ended(opened, store_on, run_on):
    store, run_id = opened
    budget = RunBudget(store if store_on else None, run_id if run_on else None)
    assert budget.guard_for(SimpleNamespace(key="c"), 1) is None
    budget.commit("c", SimpleNamespace(ledger={"spends": [pure(1.0)]}))
    budget.fail("c")
    budget.finish()
    assert store.state().runs[run_id].cells["c"].ended is None


def spec_cells(tmp_path, toy_plugins, name="s", path=None, **kwargs):
    from dpkit.spec import expand, load_spec

    path = path or write_spec(tmp_path, name, **kwargs)
    spec = load_spec(path, registry=toy_plugins)
    return path, spec, expand(spec, toy_plugins)


def test_a_capped_datasets_cells_reserve_their_plan_in_their_relation(tmp_path, toy_plugins,
                                                                      private_budget_store):
    store = BudgetStore(private_budget_store)
    store.set_cap(DatasetIds(toy_plugins)(TOY), "replace_one", epsilon=1e6, delta=1e-5)
    path, spec, cells = spec_cells(tmp_path, toy_plugins, etas="[0.01, 0.02]",
                                   privacy="privacy: {neighboring: replace_one}")
    budget = reserve_run(spec, cells, tmp_path / "out", toy_plugins)
    assert budget.store.location == store.location
    (run,) = store.state().runs.values()
    assert budget.run_id == run.id and run.spec == "s" and run.out_dir == str(tmp_path / "out")
    assert {c.relation for c in run.cells.values()} == {"replace_one"}
    reserved = [s for c in run.cells.values() for s in c.reserved]
    assert [(s["guarantee"], s["count"]) for s in reserved] == [
        (guarantee_to_dict(g), n) for g, n in plan_pairs(path)]  # what dpkit budget spec plans
    assert all(set(s) == {"label", "count", "guarantee"} for s in reserved)


def test_an_uncapped_dataset_is_not_planned_and_add_remove_is_the_default(tmp_path, toy_plugins,
                                                                         private_budget_store):
    _, spec, cells = spec_cells(tmp_path, toy_plugins)
    clear_loaded()  # the dataset is identified through the run's registry, not a cached load
    budget = reserve_run(spec, cells, tmp_path / "out", toy_plugins)
    (cell,) = BudgetStore(private_budget_store).state().runs[budget.run_id].cells.values()
    assert (cell.relation, cell.reserved) == ("add_remove", [])


def test_a_cell_whose_spends_cannot_be_planned_is_refused_before_anything_runs(
        tmp_path, toy_plugins, private_budget_store):
    store = BudgetStore(private_budget_store)
    store.set_cap(DatasetIds(toy_plugins)(TOY), epsilon=1e6, delta=1e-5)
    _, spec, (cell,) = spec_cells(tmp_path, toy_plugins, privacy="privacy: {ceiling: 1e-9}")
    named = re.escape(f"cell {cell.key} ({cell.method} {cell.point})")
    with pytest.raises(BudgetStoreError, match=rf"^{named} reads "
                                               r"a capped dataset but its spends cannot be "
                                               r"reserved before it runs: .*above the ceiling"):
        reserve_run(spec, [cell], tmp_path / "out", toy_plugins)
    assert not store.state().runs


class Undeclared(Component):
    """A defense that declares neither its releases nor its planned spends."""

    name = "toy_undeclared"

    class Params(Params):
        pass

    def run(self, ctx):
        """Never reached: the run is refused at its reservation."""
        raise AssertionError("a capped dataset's undeclared cell ran")


class UndeclaredPlugin:
    @hookimpl
    def dpkit_register_defenses(self, register):
        register(Undeclared)


def test_a_cell_that_declares_nothing_is_refused_saying_why(tmp_path, toy_plugins,
                                                            private_budget_store):
    dpkit.contract.plugins.register_plugin(UndeclaredPlugin(), "runner_budget_test")  # till reset
    registry = dpkit.contract.plugins.get_registry()
    BudgetStore(private_budget_store).set_cap(DatasetIds(registry)(TOY), epsilon=1.0, delta=1e-5)
    path = write_spec(tmp_path, "u", defense="toy_undeclared")
    path.write_text(path.read_text().replace("params: {eta: 0.01}, sweep: {eta: [0.01]}", ""))
    _, spec, (cell,) = spec_cells(tmp_path, registry, "u", path=path)
    with pytest.raises(BudgetStoreError, match=rf"^cell {cell.key} \({cell.method} \) reads a "
                                               r"capped dataset but its spends cannot be reserved "
                                               r"before it runs: the component declares neither "
                                               r"releases\(ctx\) nor planned_spends\(\)"):
        reserve_run(spec, [cell], tmp_path / "out", registry)


def test_a_store_whose_records_were_edited_is_refused_before_anything_is_reserved(
        tmp_path, toy_plugins, private_budget_store):
    """A deleted record would let a copy of the capped data escape its cap's overlap check."""
    store = BudgetStore(private_budget_store)
    store.set_cap(DatasetIds(toy_plugins)(TOY), epsilon=1e6, delta=1e-5)
    with sqlite3.connect(private_budget_store) as conn:
        conn.execute("DELETE FROM dpkit_budget_records WHERE rowid = (SELECT MIN(rowid) FROM "
                     "dpkit_budget_records)")
    _, spec, cells = spec_cells(tmp_path, toy_plugins)
    with pytest.raises(BudgetStoreError, match="stored records of toy_text .* were edited"):
        reserve_run(spec, cells, tmp_path / "out", toy_plugins)


def test_a_dead_run_of_the_folder_is_settled_even_with_nothing_pending(tmp_path, toy_plugins,
                                                                      private_budget_store):
    store = BudgetStore(private_budget_store)
    dataset = DatasetIds(toy_plugins)(TOY)
    dead = store.reserve({"c": CellPlan(dataset, "add_remove", None)}, "s",
                         str((tmp_path / "out").resolve()))
    _, spec, _ = spec_cells(tmp_path, toy_plugins)
    budget = reserve_run(spec, [], tmp_path / "out", toy_plugins)
    assert (budget.store, budget.run_id) == (None, None)
    assert store.state().runs[dead].state == "released"


def test_with_the_store_off_nothing_is_reserved(tmp_path, toy_plugins, monkeypatch):
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    _, spec, cells = spec_cells(tmp_path, toy_plugins)
    budget = reserve_run(spec, cells, tmp_path / "out", toy_plugins)
    assert (budget.store, budget.run_id) == (None, None)
