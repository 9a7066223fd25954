"""DPED's noise plan from its params (dpkit_dped/plans.py): each channel's σ spends its budget share
of the target ε at the run's δ, with the true sensitivities; the paper's accounting and the
noiseless reference. Checked against an independent dp-accounting run, not against the plan's own
events. Kills the mutants the law and plan tests cannot see (tools/mutation.toml)."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from dpkit import DpGuarantee, NoGuarantee
from dpkit_dped.params import DpedParams, PateParams
from dpkit_dped.plans import calibrate
from dpkit_dped.privacy import OUTPUT_LABELS

# distinct shares, clip and ensemble size, so that any channel given another's share or
# sensitivity shows
DPED = {"teachers": 5, "clip": 0.5, "num_queries": 40, "target_epsilon": 2.0,
        "share_threshold": 0.1, "share_votes": 0.3, "share_hidden": 0.6, "target": "hard"}
PATE = {"teachers": 5, "num_queries": 40, "target_epsilon": 2.0, "share_threshold": 0.25,
        "share_votes": 0.75, "target": "hard"}


def dped(**changes) -> DpedParams:
    return DpedParams.model_validate({**DPED, **changes})


def pate(**changes) -> PateParams:
    return PateParams.model_validate({**PATE, **changes})


def independent_epsilon(multipliers: list[float], queries: int, delta: float) -> float:
    """ε of ``queries`` queries, each one Gaussian of each noise multiplier σ/Δ, composed afresh."""
    acc = dp_accounting.rdp.RdpAccountant()
    for z in multipliers:
        acc.compose(dp_accounting.GaussianDpEvent(z), queries)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_dped_channels_split_the_target_by_their_shares_with_the_true_sensitivities(delta):
    p = dped()
    plan = calibrate(p, True, delta, "rdp")
    hidden_sens = 2 * p.clip / p.teachers
    multipliers = {"threshold": plan.sigma_threshold / 1.0, "votes": plan.sigma_votes / math.sqrt(2),
                   "hidden": plan.sigma_hidden / hidden_sens}
    eps = independent_epsilon(list(multipliers.values()), p.num_queries, delta)
    assert 0.98 * p.target_epsilon <= eps <= p.target_epsilon
    # 1/zᵢ² ∝ sᵢ: the Rényi cost of a Gaussian is 1/(2z²), each channel pays its share
    costs = {k: z**-2 for k, z in multipliers.items()}
    shares = {"threshold": p.share_threshold, "votes": p.share_votes, "hidden": p.share_hidden}
    for k in costs:
        assert costs[k] / sum(costs.values()) == pytest.approx(shares[k] / sum(shares.values()))
    assert plan.hidden_sens == pytest.approx(hidden_sens)
    assert plan.queries == p.num_queries and not plan.faithful and not plan.noiseless


def test_a_smaller_delta_buys_more_noise():
    assert calibrate(dped(), True, 1e-8, "rdp").sigma_votes > calibrate(dped(), True, 1e-5,
                                                                        "rdp").sigma_votes


def test_pate_plans_no_hidden_channel_and_gives_its_share_to_the_others():
    p = pate()
    plan = calibrate(p, False, 1e-5, "rdp")
    assert plan.sigma_hidden is None and plan.hidden_sens == 0.0
    multipliers = [plan.sigma_threshold, plan.sigma_votes / math.sqrt(2)]
    assert 0.98 * 2.0 <= independent_epsilon(multipliers, 40, 1e-5) <= 2.0
    assert multipliers[1] ** -2 / multipliers[0] ** -2 == pytest.approx(0.75 / 0.25)
    # DPED's params without the hidden channel: threshold and votes take the whole target
    alone = calibrate(dped(), False, 1e-5, "rdp")
    assert alone.sigma_hidden is None and alone.hidden_sens == 0.0
    assert alone.sigma_votes < calibrate(dped(), True, 1e-5, "rdp").sigma_votes


def test_the_faithful_threshold_is_planned_noiseless_and_charged_infinity():
    plan = calibrate(dped(threshold="faithful"), True, 1e-5, "rdp")
    assert plan.faithful and plan.sigma_threshold is None
    spends = plan.spends()
    assert isinstance(spends[0][0], NoGuarantee)
    multipliers = [plan.sigma_votes / math.sqrt(2), plan.sigma_hidden / (2 * 0.5 / 5)]
    assert 0.98 * 2.0 <= independent_epsilon(multipliers, 40, 1e-5) <= 2.0


@pytest.mark.parametrize("target", ["soft", "hard"])
def test_the_plan_names_what_the_outputs_are(target):
    for plan in (calibrate(dped(target=target), True, 1e-5, "rdp"),
                 calibrate(pate(target=target, accounting="paper"), False, 1e-5, "rdp"),
                 calibrate(dped(target=target, noiseless=True), True, 1e-5, "rdp")):
        assert plan.target == target
    labels = [label for _, label, _ in calibrate(dped(target=target), True, 1e-5, "rdp").spends()]
    assert labels[1] == OUTPUT_LABELS[target]


@pytest.mark.parametrize("uses_hidden", [True, False])
def test_a_noiseless_plan_is_every_sigma_zero_on_every_channel_it_releases(uses_hidden):
    p = dped(noiseless=True) if uses_hidden else pate(noiseless=True)
    plan = calibrate(p, uses_hidden, 1e-5, "rdp")
    assert plan.noiseless and plan.queries == 40
    assert plan.sigma_threshold == plan.sigma_votes == 0.0
    assert plan.sigma_hidden == (0.0 if uses_hidden else None)
    assert plan.hidden_sens == pytest.approx(2 * 0.5 / 5 if uses_hidden else 0.0)
    assert all(isinstance(g, NoGuarantee) for g, _, _ in plan.spends())
    assert len(plan.spends()) == (3 if uses_hidden else 2)


@pytest.mark.parametrize("delta", [1e-5, 1e-7])
def test_the_papers_accounting_is_its_per_query_sigma_with_its_sensitivities(delta):
    p = dped(accounting="paper", target_epsilon=4.0)
    plan = calibrate(p, True, delta, "rdp")
    classical = math.sqrt(2 * math.log(1.25 / delta)) / 4.0  # σ/Δ at ε = 4 per query
    assert plan.sigma_threshold == pytest.approx(classical)
    assert plan.sigma_votes == pytest.approx(classical)  # Δ = 1 (the paper), not √2
    assert plan.sigma_hidden == pytest.approx(classical * 0.5 / 5)  # C/N, not 2C/N
    assert plan.hidden_sens == pytest.approx(2 * 0.5 / 5)  # charged at the true 2C/N
    truth = independent_epsilon([classical, classical / math.sqrt(2), classical / 2], 40, delta)
    for guarantee, label, count in plan.spends():
        assert isinstance(guarantee, DpGuarantee) and count == 40
        assert f"ε = {truth:.4g} at δ = {delta:g}" in label
    paper_pate = calibrate(pate(accounting="paper", target_epsilon=4.0), False, delta, "rdp")
    assert paper_pate.sigma_hidden is None and paper_pate.hidden_sens == 0.0
    assert paper_pate.sigma_votes == pytest.approx(classical)
