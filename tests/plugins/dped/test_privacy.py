"""DPED's privacy claims: sensitivities, calibration, ledger vs an independent dp-accounting run."""

from __future__ import annotations

import math
from types import SimpleNamespace

import dp_accounting
import pytest
import torch
from dpkit_dped.aggregation import clip_rows, vote_histogram
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.privacy import (
    THRESHOLD_SENSITIVITY,
    VOTES_SENSITIVITY,
    hidden_sensitivity,
    plan_noise,
)

from dpkit.accounting import NoGuarantee

from .conftest import TEACHER


def independent_epsilon(events_and_counts, delta, accountant="rdp"):
    """ε of the given (event, count) list with a fresh dp-accounting accountant."""
    acc = (dp_accounting.rdp.RdpAccountant() if accountant == "rdp"
           else dp_accounting.pld.PLDAccountant())
    for event, count in events_and_counts:
        acc.compose(event, count)
    return acc.get_epsilon(delta)


def test_clipped_mean_sensitivity_is_2c_over_n_and_attained():
    n, clip = 8, 1.5
    gen = torch.Generator().manual_seed(0)
    teachers = torch.randn(n, 5, 16, generator=gen) * 3
    worst = teachers.clone()
    worst[3] = -teachers[3]  # one teacher's clipped vector flips to the opposite direction
    change = (clip_rows(worst, clip).mean(0) - clip_rows(teachers, clip).mean(0)).norm(dim=-1)
    assert float(change.max()) == pytest.approx(hidden_sensitivity(clip, n), rel=1e-5)
    assert hidden_sensitivity(clip, n) == pytest.approx(2 * clip / n)
    for _ in range(20):
        other = teachers.clone()
        other[5] = torch.randn(5, 16, generator=gen) * 10
        delta = (clip_rows(other, clip).mean(0) - clip_rows(teachers, clip).mean(0)).norm(dim=-1)
        assert float(delta.max()) <= hidden_sensitivity(clip, n) + 1e-6


def test_vote_histogram_l2_sensitivity_root2_and_top_count_1():
    votes = torch.tensor([[0, 1, 2], [0, 1, 2], [1, 1, 0], [2, 1, 0]])
    changed = votes.clone()
    changed[2] = torch.tensor([3, 2, 2])  # one teacher changes every vote
    h, h2 = vote_histogram(votes, 4), vote_histogram(changed, 4)
    assert torch.allclose((h - h2).norm(dim=-1), torch.full((3,), VOTES_SENSITIVITY))
    assert float((h.max(-1).values - h2.max(-1).values).abs().max()) <= THRESHOLD_SENSITIVITY


@pytest.mark.parametrize("target, accountant",
                         [(0.5, "rdp"), (2.0, "rdp"), (8.0, "rdp"), (1.0, "pld")])
def test_calibrated_noise_never_exceeds_target(target, accountant):
    plan = plan_noise(target_epsilon=target, delta=1e-5, accountant=accountant, queries=300,
                      shares={"threshold": 0.2, "votes": 0.2, "hidden": 0.6}, noisy_threshold=True,
                      hidden_sens=0.1)
    eps = independent_epsilon([(plan.total_event(), 1)], 1e-5, accountant)
    assert eps <= target
    assert eps >= 0.98 * target  # not wastefully conservative either


def test_ledger_epsilon_matches_independent_dp_accounting(make_ctx):
    ctx = make_ctx()
    params = DpedDefense.Params.model_validate({**TEACHER, "target_epsilon": 3.0})
    metrics = DpedDefense(params).run(ctx).metrics
    m, n, clip = params.num_queries, params.teachers, params.clip
    # rebuild the events from the reported σ's and the sensitivities derived by hand
    events = [(dp_accounting.GaussianDpEvent(metrics["sigma_threshold"] / 1.0), m),
              (dp_accounting.GaussianDpEvent(metrics["sigma_votes"] / math.sqrt(2)), m),
              (dp_accounting.GaussianDpEvent(metrics["sigma_hidden"] / (2 * clip / n)), m)]
    expected = independent_epsilon(events, 1e-5)
    assert ctx.ledger.epsilon() == pytest.approx(expected, rel=1e-9)
    assert expected <= 3.0
    assert sum(s.count for s in ctx.ledger.spends) == 3 * m


def test_planned_spends_equal_recorded_spends(make_ctx):
    for cls in (DpedDefense, DpedPate):
        ctx = make_ctx()
        d = cls(cls.Params.model_validate(TEACHER))
        planned = d.planned_spends(SimpleNamespace(delta=1e-5, accountant="rdp"))
        d.run(ctx)
        assert [(s.guarantee, s.label, s.count) for s in ctx.ledger.spends] == planned


def test_faithful_threshold_is_recorded_as_infinite_epsilon(make_ctx):
    ctx = make_ctx()
    params = DpedDefense.Params.model_validate({**TEACHER, "threshold": "faithful"})
    metrics = DpedDefense(params).run(ctx).metrics
    assert math.isinf(ctx.ledger.epsilon())
    assert any(isinstance(s.guarantee, NoGuarantee) for s in ctx.ledger.spends)
    assert metrics["sigma_threshold"] == 0.0
    noisy = make_ctx()
    DpedDefense(DpedDefense.Params.model_validate(TEACHER)).run(noisy)
    assert noisy.ledger.epsilon() <= TEACHER.get("target_epsilon", 2.0)


def test_a_zero_threshold_share_is_refused_not_silently_noiseless():
    """share_threshold: 0 once made the threshold check noiseless while the ledger stayed finite."""
    from pydantic import ValidationError

    from dpkit_dped.privacy import NoisePlan

    for cls in (DpedDefense, DpedPate):
        with pytest.raises(ValidationError, match="share_threshold"):
            cls.Params.model_validate({**TEACHER, "share_threshold": 0})
    with pytest.raises(ValueError, match="share_threshold=0.0 would release the threshold check"):
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=10,
                   shares={"threshold": 0.0, "votes": 1.0}, noisy_threshold=True)
    with pytest.raises(ValueError, match="share_hidden"):
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=10,
                   shares={"threshold": 0.2, "votes": 1.0, "hidden": 0.0}, noisy_threshold=True,
                   hidden_sens=0.1)
    with pytest.raises(ValueError, match="neither faithful nor noiseless"):
        NoisePlan(queries=10, sigma_threshold=None, sigma_votes=1.0)
    with pytest.raises(ValueError, match="not positive"):
        NoisePlan(queries=10, sigma_threshold=1.0, sigma_votes=0.0)


def test_aggregate_refuses_a_plan_without_threshold_noise():
    from dpkit_dped.aggregation import aggregate
    from dpkit_dped.privacy import NoisePlan

    plan = NoisePlan(queries=3, sigma_threshold=1.0, sigma_votes=1.0)
    object.__setattr__(plan, "sigma_threshold", None)  # a plan altered after its checks
    with pytest.raises(ValueError, match="noiseless top count"):
        aggregate(None, torch.zeros(3, 5), plan, threshold=1.0, clip=1.0,
                  generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate])
def test_a_noiseless_run_is_recorded_as_infinite_epsilon(cls, make_ctx):
    ctx = make_ctx()
    params = cls.Params.model_validate({**TEACHER, "noiseless": True, "target_epsilon": 1.0})
    metrics = cls(params).run(ctx).metrics
    assert math.isinf(ctx.ledger.epsilon())
    channels = 3 if cls is DpedDefense else 2  # threshold, outputs (and DPED's hidden means)
    assert [type(s.guarantee) for s in ctx.ledger.spends] == [NoGuarantee] * channels
    assert metrics["sigma_votes"] == 0.0 and metrics["sigma_threshold"] == 0.0
    assert "target_epsilon" not in metrics  # a noiseless row never reports a finite ε
