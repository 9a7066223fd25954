"""Independence of noise draws (dpkit.audit.independence) and the white-box noise laws
(dpkit.audit.noise_law): each test fails the dependence it is built for and passes fresh noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpkit.contract.plugins import get_registry
from dpkit.audit import Verdict, audit
from dpkit.audit.canary_split import independence_law
from dpkit.audit.independence import dependence, pair_tests
from dpkit.audit.noise_law import gaussian_pvalue, laplace_l2_pvalue, laplace_pvalue, reference_laplace_l2
from dpkit.testing.noise_bugs import reseeded_each_draw, reused_across_calls
from dpkit.testing.planted import PlantedBug


def test_fresh_continuous_noise_is_independent_and_repeats_are_counted():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(500, 4, generator=g), torch.randn(500, 4, generator=g)
    p, repeats = dependence(a, b)
    assert repeats == 0 and p > 1e-3
    b[:7] = a[:7]
    assert dependence(a, b) == (0.0, 7)
    b[:7] = a[:7] * (1 + 1e-8)  # equal up to rounding
    assert dependence(a, b) == (0.0, 7)


def test_correlated_noise_and_shared_radius_are_dependent():
    g = torch.Generator().manual_seed(1)
    a, fresh = torch.randn(2000, 3, generator=g), torch.randn(2000, 3, generator=g)
    assert dependence(a, 0.3 * a + fresh)[0] < 1e-6
    direction = fresh / fresh.norm(dim=1, keepdim=True)
    same_radius = direction * a.norm(dim=1, keepdim=True)  # one radius, two directions
    assert dependence(a, same_radius)[0] < 1e-6


def test_paired_tokens_agreeing_more_than_chance_are_dependent():
    g = torch.Generator().manual_seed(2)
    a = torch.randint(10, (1000,), generator=g)
    assert dependence(a, torch.randint(10, (1000,), generator=g))[0] > 1e-3
    copy = a.clone()
    copy[::3] = torch.randint(10, (334,), generator=g)
    assert dependence(a, copy)[0] < 1e-6


@pytest.mark.parametrize("bug", [reseeded_each_draw, reused_across_calls])
def test_every_pairing_sees_reseeded_or_reused_noise(bug):
    """Re-seeding before each draw and reusing one draw repeat the noise in all three pairings."""
    import dpkit.text.noise as noise

    def draw(gen):
        return noise.sample_laplace_noise(200, 3, 2.0, gen)

    fresh = pair_tests(draw, 0)
    assert all(t.repeats == 0 and t.p_value > 1e-4 for t in fresh), [t.describe() for t in fresh]
    with PlantedBug("x", "noise reused", "t", (bug("dpkit.text.noise", "sample_laplace_noise"),)).planted():
        broken = pair_tests(draw, 0)
    assert all(t.repeats == 200 for t in broken), [t.describe() for t in broken]


def test_audit_fails_noise_reused_across_calls_with_an_independence_witness():
    bug = PlantedBug("reuse", "noise reused", "laplace_dx",
                     (reused_across_calls("dpkit_baselines.laplace", "sample_laplace_noise"),))
    with bug.planted():
        report = audit("laplace_dx", {"eta": 5.0}, samples=400, seed=3, registry=get_registry())
    assert report.verdict is Verdict.FAIL
    assert report.witness.strategy.startswith("independence") and report.witness.measured == np.inf
    assert report.checks["independence"]["two calls"]["repeats"] == 400


@pytest.mark.parametrize("factor", [1.5, 1 / 1.5])
def test_laws_reject_a_one_and_a_half_scale_error(factor):
    rng = np.random.default_rng(4)
    assert laplace_l2_pvalue(reference_laplace_l2(rng, 2000, 6, 3.0), 3.0) > 1e-3
    assert laplace_l2_pvalue(reference_laplace_l2(rng, 2000, 6, 3.0 / factor), 3.0) < 1e-3
    assert gaussian_pvalue(rng.normal(0, 2.0, 3000), 2.0) > 1e-3
    assert gaussian_pvalue(rng.normal(0, 2.0 * factor, 3000), 2.0) < 1e-3
    assert laplace_pvalue(rng.laplace(0, 0.5, 3000), 0.5) > 1e-3
    assert laplace_pvalue(rng.laplace(0, 0.5 * factor, 3000), 0.5) < 1e-3


def test_split_audit_independence_law_sees_a_client_that_reseeds_per_text():
    g = torch.Generator().manual_seed(5)
    sent = torch.randn(100, 4, generator=g)
    fresh = sent + torch.randn(100, 4, generator=g)
    assert independence_law([fresh], sent, 10.0)["noise independence"][0] > 1e-3
    same = sent + torch.randn(1, 4, generator=g)          # one draw for every text
    assert independence_law([same], sent, 10.0)["noise independence"][0] == 0.0
    assert independence_law([same], sent, float("inf")) == {}


@pytest.mark.parametrize("name,params", [("laplace_dx", {"eta": 5.0}), ("text2text", {"eta": 5.0}),
                                         ("santext", {"epsilon": 2.0})])
def test_audit_reports_three_pairings_and_the_white_box_law(name, params):
    report = audit(name, params, samples=400, seed=1, registry=get_registry())
    assert report.verdict is not Verdict.FAIL and report.verdict is not Verdict.LAW_MISMATCH
    assert set(report.checks["independence"]) == {"two calls", "two cells", "two seeds"}
    assert ("noise_law" in report.checks) == (name != "santext")
    if name != "santext":
        law = report.checks["noise_law"]
        assert law["eta_declared"] == 5.0 and law["expected_mean_norm"] == pytest.approx(6 / 5.0)
        assert abs(law["mean_norm"] / law["expected_mean_norm"] - 1) < 0.1
