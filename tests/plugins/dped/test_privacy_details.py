"""DPED's noise plan in detail: the exact ledger entries of noiseless and faithful plans, the
events of each channel with their noise multipliers, refusals with their reasons, the share
split. Kills the mutants of dpkit_dped/privacy.py the audits cannot see (tools/mutation.toml)."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from dpkit.accounting import DpGuarantee, NoGuarantee
from dpkit_dped.privacy import (
    FAITHFUL_REASON,
    NOISELESS_REASON,
    OUTPUT_LABELS,
    NoisePlan,
    hidden_sensitivity,
    noiseless_plan,
    plan_noise,
)


@pytest.mark.parametrize("hidden,target", [(True, "soft"), (False, "hard")])
def test_noiseless_plan_is_every_sigma_zero_and_one_no_guarantee_entry_per_channel(hidden, target):
    plan = noiseless_plan(7, hidden=hidden, hidden_sens=0.25, target=target)
    assert plan == NoisePlan(queries=7, sigma_threshold=0.0, sigma_votes=0.0,
                             sigma_hidden=0.0 if hidden else None, hidden_sens=0.25,
                             noiseless=True, target=target)
    channels = ["threshold check", "teacher outputs"] + (["hidden means"] if hidden else [])
    assert plan.spends() == [(NoGuarantee(NOISELESS_REASON), f"noiseless {c} (σ = 0)", 1)
                             for c in channels]
    with pytest.raises(ValueError, match="a noiseless plan has no Gaussian events; its ledger "
                                         "entry is a NoGuarantee"):
        plan.per_query_events()


def test_faithful_plan_records_its_threshold_first_then_each_channel_per_query():
    plan = NoisePlan(queries=30, sigma_threshold=None, sigma_votes=4.0, sigma_hidden=0.6,
                     hidden_sens=0.2, faithful=True, target="soft")
    spends = plan.spends()
    assert spends[0] == (NoGuarantee(FAITHFUL_REASON), "noiseless rare-word threshold (faithful)", 1)
    assert spends[1] == (DpGuarantee(dp_accounting.GaussianDpEvent(4.0 / math.sqrt(2))),
                         OUTPUT_LABELS["soft"], 30)
    assert spends[2][0] == DpGuarantee(dp_accounting.GaussianDpEvent(0.6 / 0.2))
    assert spends[2][2] == 30 and "Δ₂=2C/N=0.2" in spends[2][1]
    assert len(spends) == 3


def test_noisy_plan_events_and_total():
    plan = NoisePlan(queries=12, sigma_threshold=2.0, sigma_votes=3.0, target="hard")
    events = plan.per_query_events()
    assert events == [(dp_accounting.GaussianDpEvent(2.0), "threshold check, noisy top count (Δ=1)"),
                      (dp_accounting.GaussianDpEvent(3.0 / math.sqrt(2)), OUTPUT_LABELS["hard"])]
    assert [count for _, _, count in plan.spends()] == [12, 12]
    assert plan.total_event() == dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(e, 12) for e, _ in events])


@pytest.mark.parametrize("kwargs,match", [
    ({"sigma_threshold": None, "sigma_votes": 1.0}, "neither faithful nor noiseless"),
    ({"sigma_threshold": 1.0, "sigma_votes": 0.0}, r"σ of votes is \[0.0\], not positive"),
    ({"sigma_threshold": 1.0, "sigma_votes": 1.0, "sigma_hidden": -1.0}, r"σ of hidden is \[-1.0\]"),
    ({"sigma_threshold": 1.0, "sigma_votes": 1.0, "target": "argmax"}, "target must be one of"),
])
def test_a_plan_that_would_drop_noise_is_refused_with_its_reason(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NoisePlan(queries=1, **kwargs)


def test_hidden_sensitivity_is_two_c_over_n():
    assert hidden_sensitivity(0.5, 10) == pytest.approx(0.1)
    assert hidden_sensitivity(3.0, 4) == pytest.approx(1.5)


def test_shares_split_one_multiplier_so_the_query_is_one_gaussian():
    """1/zᵢ² = sᵢ/z² (shares renormalised over the channels present): Σ 1/zᵢ² = 1/z²."""
    plan = plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=50,
                      shares={"threshold": 2.0, "votes": 1.0, "hidden": 1.0, "unused": 5.0},
                      noisy_threshold=True, hidden_sens=0.3, target="soft")
    z = [plan.sigma_threshold / 1.0, plan.sigma_votes / math.sqrt(2), plan.sigma_hidden / 0.3]
    assert [z[0] ** -2 / sum(v ** -2 for v in z), z[1] ** -2 / sum(v ** -2 for v in z)] == \
        pytest.approx([0.5, 0.25])
    faithful = plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=50,
                          shares={"threshold": 2.0, "votes": 1.0}, noisy_threshold=False)
    assert faithful.faithful and faithful.sigma_threshold is None and faithful.sigma_hidden is None
    with pytest.raises(ValueError, match="share_votes=0.0 would release the votes values without "
                                         "noise"):
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=5,
                   shares={"votes": 0.0}, noisy_threshold=False)
    with pytest.raises(ValueError, match=r"share_threshold=0 would release the threshold check.*"
                                         r"threshold: faithful"):
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=5,
                   shares={"votes": 1.0}, noisy_threshold=True)


def test_refusals_say_how_to_fix_them():
    with pytest.raises(ValueError) as no_noise:
        NoisePlan(queries=1, sigma_threshold=None, sigma_votes=1.0)
    assert str(no_noise.value).endswith("give it a positive budget share or use threshold: "
                                        "faithful (ε = ∞)")
    with pytest.raises(ValueError) as zeros:
        NoisePlan(queries=1, sigma_threshold=0.0, sigma_votes=0.0)
    assert str(zeros.value) == ("σ of votes, threshold is [0.0, 0.0], not positive: a noiseless "
                                "release needs noiseless=True (recorded as ε = ∞)")
    with pytest.raises(ValueError) as votes:
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=5,
                   shares={"votes": 0.0}, noisy_threshold=False)
    assert str(votes.value).endswith("while the ledger stays finite; give it a positive share")
    with pytest.raises(ValueError) as threshold:
        plan_noise(target_epsilon=1.0, delta=1e-5, accountant="rdp", queries=5,
                   shares={"votes": 1.0}, noisy_threshold=True)
    assert str(threshold.value).endswith("give it a positive share (or threshold: faithful, "
                                         "recorded as ε = ∞)")


def test_defaults_are_no_hidden_sensitivity_and_hard_targets():
    plan = noiseless_plan(4, hidden=False)
    assert plan.hidden_sens == 0.0 and plan.target == "hard"
    calibrated = plan_noise(target_epsilon=2.0, delta=1e-5, accountant="rdp", queries=4,
                            shares={"votes": 1.0}, noisy_threshold=False)
    assert calibrated.hidden_sens == 0.0 and calibrated.target == "hard"
