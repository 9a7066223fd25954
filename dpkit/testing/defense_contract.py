"""The contract suite every defense passes: metrics and spends, the release path, plan = run.

Example::

    from dpkit.testing import DefenseContract

    class TestMyDefense(DefenseContract):
        defense = "my_defense"
        params = {"sigma": 2.0}
        invalid_params = [{"sigma": "x"}]

        def make_context(self):
            return RunContext(dataset=..., model=..., device=torch.device("cpu"), seed=0,
                              ledger=Ledger(), registry=get_registry())
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from dpkit.testing.params_contract import ParamsContract, build_component, tiny_context


class DefenseContract(ParamsContract):
    """Checks every defense must pass; set ``defense``, ``params``, ``invalid_params`` and
    override :meth:`make_context` (dataset and model for one tiny cell)."""

    kind: ClassVar[str] = "defense"
    defense: ClassVar[Any] = ""
    spends_privacy: ClassVar[bool] = True

    def make_context(self) -> Any:
        """The RunContext of one tiny cell (default: no dataset, the generated test space)."""
        from dpkit.audit import make_test_space
        return tiny_context(make_test_space(), None)

    def _run(self) -> tuple[Any, Any]:
        """(result, ctx) of one run through the runner's own path (declare, run, settle)."""
        import random

        import numpy as np

        from dpkit.contract.context import derive_seed
        from dpkit.contract.releases import run_defense

        ctx = self.make_context()
        seed = derive_seed(ctx.seed, "global")  # the runner seeds the global generators too
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        return run_defense(build_component("defense", self.defense, self.params), ctx), ctx

    def test_run_reports_metrics_and_spends(self):
        """run() returns finite metrics and records its spends on the ledger."""
        from dpkit.contract.protocols import DefenseResult

        result, ctx = self._run()
        assert isinstance(result, DefenseResult)
        assert all(math.isfinite(float(v)) or v == math.inf for v in result.metrics.values())
        if self.spends_privacy:
            assert len(ctx.ledger) > 0, "the defense released data without a ledger spend"

    def test_view_is_what_crossed_the_wire(self):
        """Every view entry crossed ``ctx.wire`` (or was derived from what did), every upload had a
        declared release, and no release carried more than it declared."""
        result, ctx = self._run()
        unsent = ctx.wire.unsent(result.view)
        assert not unsent, f"server view entries {unsent} never crossed ctx.wire"
        undeclared = [r for r in ctx.ledger.no_guarantee_reasons
                      if "without a declared release" in r or "the excess is not covered" in r]
        assert not undeclared, f"uploads outside their declared releases: {undeclared}"
        for name in ctx.wire.units:
            release = ctx.wire.releases[name]
            covered = release.covered_by or name
            assert covered in ctx.wire.spends, f"upload {name!r} has no ledger entry"

    def test_plan_equals_run(self):
        """``dpkit budget spec`` plans exactly the entries a run records (labels, counts, ∞)."""
        from dpkit.runner.plan import NOT_DECLARED, plan_cell

        result, ctx = self._run()
        ledger = ctx.ledger
        privacy = type("Privacy", (), {"delta": ledger.delta_target,
                                       "accountant": ledger.accountant, "ceiling": None,
                                       "neighboring": ledger.neighboring})
        plan = plan_cell(build_component("defense", self.defense, self.params), "defense", privacy,
                         self.make_context())
        assert plan["note"] != NOT_DECLARED, (f"{self.defense} declares neither releases(ctx) "
                                              "nor planned_spends(): its plan cannot be shown")
        ran = [(s.label, s.count, s.guarantee) for s in ledger.spends]
        planned = [(s["label"], s["count"], s["guarantee"]) for s in plan["spends"]]
        from dpkit.accounting.serialize import guarantee_to_dict

        assert [(label, count, guarantee_to_dict(g)) for label, count, g in ran] == planned

    def test_reproducible(self):
        """The same seed gives the same metrics (timings, named ``*_s`` or ``*seconds``, aside)."""
        first, _ = self._run()
        again, _ = self._run()
        assert _untimed(first.metrics) == _untimed(again.metrics)


def _untimed(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not (k.endswith("_s") or k.endswith("seconds"))}
