"""Plan = run for every DPED defense, as two measurements: `dpkit budget spec`'s plan (the
component's planned_spends) against the ledger a run recorded, whose releases the wire counted."""

import pytest
from dpkit_dped import defenses, dpsgd, releases

from dpkit.contract.plugins import get_registry
from dpkit.contract.releases import run_defense
from dpkit.contract.registry import Registry
from dpkit.runner.execute import execute_cell
from dpkit.runner.plan import plan_cell, plan_one
from dpkit.spec import Cell
from dpkit.testing.defense_contract import assert_plan_equals_run, privacy_of
from tests.plugins.dped.conftest import SMALL, TEACHER, TinyPublic, TinyTopics, tiny_dataset

SGD = {**SMALL, "steps": 12, "sampling_rate": 0.2, "pairs_per_doc": 8}
CASES = {
    "dped": {**TEACHER, "target_epsilon": 4.0},
    "dped (faithful threshold)": {**TEACHER, "target_epsilon": 4.0, "threshold": "faithful"},
    "dped (hard targets)": {**TEACHER, "target_epsilon": 4.0, "target": "hard"},
    "dped (noiseless)": {**TEACHER, "noiseless": True},
    "dped (paper's accounting)": {**TEACHER, "target_epsilon": 1.0, "accounting": "paper"},
    "dped_pate": {**TEACHER, "target_epsilon": 4.0},
    "dped_dpsgd": {**SGD, "target_epsilon": 4.0},
    "dped_nonprivate_sgd": SGD,
    "dped_public_sgd": {**SGD, "target_epsilon": 4.0},
    "dped_nonprivate": SMALL,
    "dped_public": SMALL,
    "dped_ensemble": {**SMALL, "teachers": 4},
}


def run_and_plan(case: str, make_ctx):
    """(plan record, run context) of one case: the run goes through the runner's own path."""
    name, params = case.split(" ")[0], CASES[case]
    registry = get_registry()
    ctx = make_ctx()
    run_defense(registry.build("defense", name, params), ctx)
    plan = plan_cell(registry.build("defense", name, params), "defense", privacy_of(ctx.ledger))
    return plan, ctx


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_plan_equals_what_the_run_recorded(case, make_ctx):
    plan, ctx = run_and_plan(case, make_ctx)  # no ctx for the plan: it needs no data
    assert plan["spends"] and plan["note"] == ""
    assert_plan_equals_run(plan, ctx)
    assert_wire_counts(case, ctx)


def assert_wire_counts(case: str, ctx) -> None:
    """What the wire measured: queries asked and answered, DP-SGD steps, models sent."""
    units, params = ctx.wire.units, CASES[case]
    if "num_queries" in params:
        queries = params["num_queries"]
        assert units[releases.THRESHOLD] == queries  # one flag per query asked
        answered = units[releases.ANSWERS]
        assert answered <= queries  # one row per query answered
        assert answered > 0 or "(noiseless)" in case or "faithful" in case  # r = 0.2 > the tiny
        # corpus's noiseless top probability mass: those cases answer nothing
        assert units.get(releases.HIDDEN, answered) == answered
        assert (releases.HIDDEN in units) == (case.split(" ")[0] == "dped")  # PATE: outputs only
    elif "steps" in params:
        assert units[releases.GRADIENT] == params["steps"]  # one send per step taken
        assert ctx.wire.bytes(name=releases.GRADIENT) > 0
    else:
        assert units[releases.MODEL] == 1


def test_a_run_that_answers_more_queries_than_planned_fails(make_ctx, monkeypatch):
    real = defenses.teacher_outputs

    def more_queries(ctx, setup, p, **kwargs):  # a bug: every vocabulary word is queried
        return real(ctx, setup, p.model_copy(update={"num_queries": len(setup.vocab)}), **kwargs)

    monkeypatch.setattr(defenses, "teacher_outputs", more_queries)
    plan, ctx = run_and_plan("dped", make_ctx)
    assert ctx.wire.units[releases.THRESHOLD] > CASES["dped"]["num_queries"]
    with pytest.raises(AssertionError, match="more units than declared"):
        assert_plan_equals_run(plan, ctx)
    assert any("the excess is not covered" in r for r in ctx.ledger.no_guarantee_reasons)


def test_a_run_that_trains_more_steps_than_planned_fails(make_ctx, monkeypatch):
    real = dpsgd.train_dpsgd_documents
    monkeypatch.setattr(dpsgd, "train_dpsgd_documents",
                        lambda *a, **k: real(*a, **{**k, "steps": k["steps"] + 3}))
    plan, ctx = run_and_plan("dped_dpsgd", make_ctx)
    assert ctx.wire.units[releases.GRADIENT] == SGD["steps"] + 3
    with pytest.raises(AssertionError, match="more units than declared"):
        assert_plan_equals_run(plan, ctx)


def test_a_plan_that_under_states_the_run_fails(make_ctx, monkeypatch):
    """The plan is a second statement (params only): if it lists fewer queries than the run
    declares and sends, the comparison fails even though the wire saw no excess."""
    plan, ctx = run_and_plan("dped_pate", make_ctx)
    fewer = [{**s, "count": s["count"] - 1} for s in plan["spends"]]
    with pytest.raises(AssertionError, match="differs from its plan"):
        assert_plan_equals_run({**plan, "spends": fewer}, ctx)


class TinyPrivate(TinyPublic):
    """The tests' private corpus as a registered source (for a cell run by the runner)."""

    name = "tiny_private"

    def load(self):
        """The corpus."""
        return tiny_dataset("tiny_private", 120, 30, seed=0)


def dped_cell(name: str, params: dict) -> tuple[Cell, Registry]:
    """A one-seed cell of ``name`` on the tiny corpora, and a registry that knows them."""
    registry = Registry()
    for source in (TinyPublic, TinyTopics, TinyPrivate):
        registry.add("dataset", source, "tests")
    registry.add("defense", type(get_registry().build("defense", name, params)), "dpkit_dped")
    cell = Cell("tiny", name, "defense", name, params, {}, 0, {"name": "tiny_private", "params": {}},
                None, [], {}, "cpu", {"delta": 1e-5, "accountant": "rdp"}, key=f"tiny-{name}")
    return cell, registry


def test_the_runner_checks_each_cell_against_its_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    cell, registry = dped_cell("dped_dpsgd", {**CASES["dped_dpsgd"], "steps": 4})
    assert plan_one(cell, registry)["spends"]  # the plan needs no data for DPED's family
    assert execute_cell(cell, registry, server="inprocess").plan == "equal"
    real = dpsgd.train_dpsgd_documents
    monkeypatch.setattr(dpsgd, "train_dpsgd_documents",
                        lambda *a, **k: real(*a, **{**k, "steps": k["steps"] + 1}))
    row = execute_cell(cell, registry, server="inprocess")
    assert row.plan.startswith("differs from the plan")
    assert "noisy_gradient (over declaration)" in row.plan
