"""The contract suite every defense passes: metrics and spends, the release path, plan = run.

Example::

    from dpkit.testing import DefenseContract

    class TestMyDefense(DefenseContract):
        defense = "my_defense"
        params = {"sigma": 2.0}
        invalid_params = [{"sigma": "x"}]

        def make_context(self):
            return tiny_context(model=..., dataset=...)
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

    def _run(self, noise_secret: str | None = None) -> tuple[Any, Any]:
        """(result, ctx) of one run through the runner's own path (declare, run, settle)."""
        import random

        import numpy as np

        from dpkit.contract.context import derive_seed
        from dpkit.contract.releases import run_defense

        ctx = self.make_context()
        ctx.noise_secret = noise_secret
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

    def test_every_upload_is_declared(self):
        """Every upload had a declared release, and no release carried more than it declared."""
        result, ctx = self._run()
        undeclared = [r for r in ctx.ledger.no_guarantee_reasons
                      if "without a declared release" in r or "the excess is not covered" in r]
        assert not undeclared, f"uploads outside their declared releases: {undeclared}"
        for name in ctx.wire.units:
            assert name in ctx.wire.spends or ctx.wire.releases[name].count == 0, \
                f"upload {name!r} has no ledger entry"

    def test_release_noise_comes_from_the_run_secret(self):
        """Two runs that differ only in the run's noise secret send different bytes: the noise
        of a release is drawn from ``ctx.noise_generator``, which a server that knows the spec's
        public seeds cannot regenerate. (Skipped for a defense with no finite release.)"""
        import pytest

        from dpkit.boundary.session import tally

        digests = []
        for secret in ("first-secret", "second-secret"):
            result, ctx = self._run(noise_secret=secret)
            if not self.spends_privacy or not ctx.wire.spends or self._unbounded(ctx.ledger):
                pytest.skip("no finite release to protect")
            digests.append(tally(ctx.wire.channel())["digests"])
        same = sorted(k for k in digests[0] if digests[0][k] == digests[1].get(k))
        noisy = [k for k in same if k in self._finite_releases(ctx)]
        assert not noisy, (f"releases {noisy} sent the same bytes under two noise secrets: their "
                           "noise is not drawn from ctx.noise_generator(...)")

    @staticmethod
    def _unbounded(ledger: Any) -> bool:
        summary = ledger.summary()
        return any(v == math.inf for v in summary.values() if isinstance(v, float))

    @staticmethod
    def _finite_releases(ctx: Any) -> set[str]:
        return {name for name, release in ctx.wire.releases.items() if not release.is_uncovered}

    def test_plan_equals_run(self):
        """``dpkit budget spec`` plans exactly the entries a run records (labels, counts, ∞), and
        no release carried more units than the wire was told it would."""
        from dpkit.runner.plan import NOT_DECLARED, plan_cell

        result, ctx = self._run()
        plan = plan_cell(build_component("defense", self.defense, self.params), "defense",
                         privacy_of(ctx.ledger), self.make_context())
        assert plan["note"] != NOT_DECLARED, (f"{self.defense} declares neither releases(ctx) "
                                              "nor planned_spends(): its plan cannot be shown")
        assert_plan_equals_run(plan, ctx)

    def test_reproducible(self):
        """The same seed gives the same metrics (timings, named ``*_s`` or ``*seconds``, aside)."""
        first, _ = self._run()
        again, _ = self._run()
        assert _untimed(first.metrics) == _untimed(again.metrics)


def _untimed(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not (k.endswith("_s") or k.endswith("seconds"))}


def privacy_of(ledger: Any) -> Any:
    """The privacy settings (δ, accountant, neighbouring; no ceiling) of ``ledger``, as a plan takes them."""
    from types import SimpleNamespace

    return SimpleNamespace(delta=ledger.delta_target, accountant=ledger.accountant, ceiling=None,
                           neighboring=ledger.neighboring)


def assert_plan_equals_run(plan: dict[str, Any], ctx: Any) -> None:
    """Fail unless ``plan`` (a :func:`dpkit.runner.plan.plan_cell` / ``plan_one`` record) lists
    exactly the entries ``ctx.ledger`` recorded in the run — labels, counts and guarantees — and
    every release on ``ctx.wire`` carried at most the units it declared (the wire's own count)."""
    from dpkit.accounting.serialize import guarantee_to_dict

    limits = {name: ctx.wire.releases[name].limit for name in ctx.wire.units}
    over = {name: (sent, limits[name]) for name, sent in ctx.wire.units.items()
            if limits[name] is not None and sent > limits[name]}
    assert not over, f"releases carried more units than declared (sent, declared): {over}"
    ran = [(s.label, s.count, guarantee_to_dict(s.guarantee)) for s in ctx.ledger.spends]
    planned = [(s["label"], s["count"], s["guarantee"]) for s in plan["spends"]]
    assert ran == planned, ("the run's ledger differs from its plan:\n  planned "
                            f"{[(label, n) for label, n, _ in planned]}\n  ran     "
                            f"{[(label, n) for label, n, _ in ran]}")
