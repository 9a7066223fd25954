"""Planned spends of components and specs (the engine of ``dpkit budget spec``)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import dp_accounting

from dpkit.accounting import DpGuarantee, NoGuarantee, calibrate_gaussian
from dpkit.runner.plan import plan_cell, plan_spec, plan_table
from dpkit.spec import read_yaml
from dpkit.contract.plugins import get_registry

PRIVACY = SimpleNamespace(delta=1e-5, accountant="rdp", ceiling=None)


class PlannedDefense:
    """Declares a calibrated DP-SGD run plus a noiseless threshold."""

    def planned_spends(self, privacy):
        sigma = calibrate_gaussian(2.0, privacy.delta, sampling_rate=0.1, steps=50)
        step = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(sigma))
        return [(DpGuarantee(step, "DP-SGD step"), "training", 50),
                (NoGuarantee("noiseless threshold on private votes"), "threshold", 1)]


def test_planned_dp_spends_compose_and_no_guarantee_is_infinite():
    plan = plan_cell(PlannedDefense(), "defense", PRIVACY)
    assert [s["count"] for s in plan["spends"]] == [50, 1]
    assert plan["summary"]["epsilon"] == "inf" and plan["refused"] is None
    assert plan["reasons"] == ["noiseless threshold on private votes"]
    json.dumps(plan, allow_nan=False)


def test_ceiling_refusal_is_reported_not_raised():
    capped = SimpleNamespace(delta=1e-5, accountant="rdp", ceiling=2.0)
    plan = plan_cell(PlannedDefense(), "defense", capped)
    assert 1.98 <= plan["summary"]["epsilon"] <= 2.0  # the calibrated run fits exactly
    assert "no valid guarantee" in plan["refused"]
    assert "REFUSED by the ceiling" in plan_table([{**plan, "method": "m", "point": {}}])


def test_undeclared_component_says_so():
    plan = plan_cell(object(), "defense", PRIVACY)
    assert plan["spends"] == [] and "releases(ctx)" in plan["note"]


def test_quick_spec_with_real_plugins():
    spec = Path(__file__).resolve().parents[2] / "specs" / "quick.yaml"
    plans = plan_spec(str(spec), get_registry())
    swept = [float(e) for e in read_yaml(spec)["mechanism"]["sweep"]["eta"]]  # two methods
    assert len(plans) == 2 * len(swept) and all(p["kind"] == "mechanism" for p in plans)
    etas = sorted(p["summary"]["eta_per_token"] for p in plans if p["component"] == "laplace_dx")
    assert etas == sorted(swept)
    assert all(math.isfinite(p["summary"]["eta_per_token"]) for p in plans)
