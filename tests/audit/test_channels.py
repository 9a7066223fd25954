"""Per-channel audits of DPED / PATE and the DP-SGD audit's charged steps (issue 31's misses)."""

import pytest
from dpkit_dped.planted import DPSGD, SOFT

from dpkit.audit import Verdict, audit_defense
from dpkit.audit.channels import gaussian_llr_p_value
from dpkit.testing.planted import PlantedBug, scale_draws
from dpkit.contract.plugins import get_registry

AGG = "dpkit_dped.aggregation"


@pytest.mark.parametrize("defense,channels", [("dped", ["threshold", "outputs", "hidden"]),
                                              ("dped_pate", ["threshold", "outputs"])])
def test_each_channel_reports_bound_claim_reach_and_law(defense, channels):
    report = audit_defense(defense, SOFT, canaries=400, seed=3, registry=get_registry())
    rows = report.checks["channels"]
    assert [r["name"] for r in rows] == channels
    whole = report.findings[len(rows)].claimed
    for r in rows:
        assert 0 < r["claimed"] <= whole and r["reach"] > 0 and r["law_p"] is not None
    assert report.checks["channel_confidence"] == pytest.approx(1 - 0.05 / len(rows))
    assert report.verdict is Verdict.PASS, report.one_line()


def test_claim_is_fixed_by_the_plan_not_by_the_canary_count():
    small = audit_defense("dped_pate", SOFT, canaries=100, seed=0, registry=get_registry()).checks["channels"]
    large = audit_defense("dped_pate", SOFT, canaries=2000, seed=0, registry=get_registry()).checks["channels"]
    assert [r["claimed"] for r in small] == pytest.approx([r["claimed"] for r in large])
    assert all(b["reach"] > a["reach"] for a, b in zip(small, large))


@pytest.mark.parametrize("defense,site", [("dped_pate", "sigma_votes"), ("dped", "sigma_hidden")],
                         ids=["pate-votes", "dped-hidden"])
def test_issue_31_misses_are_caught(defense, site):
    """PATE vote noise ×0.1 and DPED hidden-mean noise ×0.1 PASSed the summed-score audit."""
    bug = PlantedBug("×0.1", "noise scaled", defense, (scale_draws(AGG, 0.1, site=site),))
    with bug.planted():
        report = audit_defense(defense, {"target_epsilon": 150.0}, canaries=1000, seed=0, registry=get_registry())
    assert report.verdict in (Verdict.FAIL, Verdict.LAW_MISMATCH), report.one_line()
    assert site.split("_")[1] in report.reason or report.verdict is Verdict.FAIL


def test_gaussian_law_test_has_power_and_size():
    import numpy as np

    rng = np.random.default_rng(0)
    inc = rng.random(2000) < 0.5
    shift = 0.05
    sign = np.where(inc, 1.0, -1.0)
    right = sign * shift ** 2 / 2 + shift * rng.standard_normal(2000)
    assert gaussian_llr_p_value(right, inc, shift) > 0.01
    assert gaussian_llr_p_value(sign * shift ** 2 / 2 + shift / 4 * rng.standard_normal(2000),
                                inc, shift) < 1e-6


def test_dpsgd_audit_charges_the_steps_it_trains():
    params = {**DPSGD, "steps": 50, "steps_by_epsilon": {2.0: 120}}
    report = audit_defense("dped_dpsgd", params, canaries=100, seed=0, registry=get_registry())
    run = report.checks["runs"][0]
    assert run["steps_trained"] == run["steps_charged"] == 120
