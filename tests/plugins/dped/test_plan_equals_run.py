"""Plan = run for every DPED defense: `dpkit budget spec` lists exactly the spends a run records."""

from types import SimpleNamespace

import pytest

from dpkit.runner.plan import plan_cell
from dpkit.accounting.serialize import guarantee_to_dict
from dpkit.contract.plugins import get_registry
from tests.plugins.dped.conftest import SMALL, TEACHER

SGD = {**SMALL, "steps": 12, "sampling_rate": 0.2, "pairs_per_doc": 8}
CASES = {
    "dped": {**TEACHER, "target_epsilon": 4.0},
    "dped (faithful threshold)": {**TEACHER, "target_epsilon": 4.0, "threshold": "faithful"},
    "dped_pate": {**TEACHER, "target_epsilon": 4.0},
    "dped_dpsgd": {**SGD, "target_epsilon": 4.0},
    "dped_nonprivate_sgd": SGD,
    "dped_nonprivate": SMALL,
    "dped_public": SMALL,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_planned_spends_equal_the_run(case, make_ctx):
    name = case.split(" ")[0]
    params = CASES[case]
    registry = get_registry()
    ctx = make_ctx()
    registry.build("defense", name, params).run(ctx)
    ran = [(s.label, s.count, guarantee_to_dict(s.guarantee)) for s in ctx.ledger.spends]
    privacy = SimpleNamespace(delta=ctx.ledger.delta_target, accountant=ctx.ledger.accountant,
                              ceiling=None, neighboring=ctx.ledger.neighboring)
    plan = plan_cell(registry.build("defense", name, params), "defense", privacy, make_ctx())
    assert [(s["label"], s["count"], s["guarantee"]) for s in plan["spends"]] == ran
