"""Soft targets: the noisy sum of teacher probability vectors costs what a one-hot vote costs, its
threshold check keeps sensitivity 1, and the noise the run draws is the noise the ledger charges."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from dpkit_dped.aggregation import aggregate, teacher_probability_sum
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.privacy import (
    THRESHOLD_SENSITIVITY,
    VOTES_SENSITIVITY,
    NoisePlan,
    plan_noise,
)
from dpkit_dped.skipgram import WordModel
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import TEACHER

PRIVACY = SimpleNamespace(delta=1e-5, accountant="rdp")


@st.composite
def simplex_stacks(draw, max_teachers: int = 6, max_vocab: int = 12):
    """(teachers' probability vectors ``[N, V]``, a replacement vector for teacher 0 ``[V]``):
    sharp, flat and one-hot rows alike."""
    n = draw(st.integers(2, max_teachers))
    v = draw(st.integers(2, max_vocab))
    weights = st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1e6)), min_size=v, max_size=v).filter(
        lambda w: sum(w) > 0)
    rows = [draw(weights) for _ in range(n + 1)]
    probs = torch.tensor(rows, dtype=torch.float64)
    probs = probs / probs.sum(dim=1, keepdim=True)
    return probs[:n], probs[n]


@settings(max_examples=300, deadline=None)
@given(simplex_stacks())
def test_one_teacher_moves_the_summed_probabilities_by_at_most_root2_and_the_top_by_1(stack):
    probs, replacement = stack
    changed = probs.clone()
    changed[0] = replacement
    before, after = probs.sum(0), changed.sum(0)
    assert float((before - after).norm()) <= VOTES_SENSITIVITY + 1e-9
    assert abs(float(before.max() - after.max())) <= THRESHOLD_SENSITIVITY + 1e-9


def test_the_soft_bounds_are_attained_by_two_one_hot_vectors():
    probs = torch.zeros(4, 5)
    probs[:, 0] = 1.0  # every teacher sure of word 0
    changed = probs.clone()
    changed[0] = torch.tensor([0, 1.0, 0, 0, 0])
    assert float((probs.sum(0) - changed.sum(0)).norm()) == pytest.approx(VOTES_SENSITIVITY)
    assert float(probs.sum(0).max() - changed.sum(0).max()) == pytest.approx(THRESHOLD_SENSITIVITY)


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate])
def test_soft_and_hard_targets_plan_the_same_spends(cls):
    plans = {t: cls(cls.Params.model_validate({**TEACHER, "target_epsilon": 3.0, "target": t}))
             .planned_spends(PRIVACY) for t in ("soft", "hard")}
    assert [(g, n) for g, _, n in plans["soft"]] == [(g, n) for g, _, n in plans["hard"]]
    labels = [label for _, label, _ in plans["soft"]]
    assert any("probability vectors" in label for label in labels)


def test_teacher_probability_sum_is_the_sum_of_softmaxes():
    g = torch.Generator().manual_seed(0)
    teachers = [WordModel(torch.randn(7, 3, generator=g), torch.randn(7, 3, generator=g))
                for _ in range(3)]
    queries = torch.tensor([0, 4, 6])
    total = teacher_probability_sum(teachers, queries, chunk=2)
    expected = sum((t.vectors[queries] @ t.out_vectors.T).softmax(-1) for t in teachers)
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(total.sum(-1), torch.full((3,), 3.0))


def soft_plan(**overrides) -> NoisePlan:
    plan = plan_noise(target_epsilon=4.0, delta=1e-5, accountant="rdp", queries=100,
                      shares={"threshold": 0.2, "votes": 0.2, "hidden": 0.6}, noisy_threshold=True,
                      hidden_sens=0.25, target="soft")
    return plan if not overrides else NoisePlan(**{**plan.__dict__, **overrides})


def test_aggregate_draws_the_planned_noise_on_every_soft_release():
    """Each noise draw has the std the ledger is charged for (a draw cut to ¼ fails here)."""
    plan = soft_plan()
    m, v, d = 4000, 30, 16
    r = 10 * plan.sigma_threshold
    summed = torch.zeros(m, v)
    summed[:, 0] = r - plan.sigma_threshold  # top entry one σ₁ below r
    vectors = torch.zeros(4, m, d)
    agg = aggregate(vectors, summed, plan, threshold=r, clip=1.0,
                    generator=torch.Generator().manual_seed(0))
    assert agg.soft is not None and agg.hidden is not None
    assert float((agg.soft - summed).std()) == pytest.approx(plan.sigma_votes, rel=0.02)
    assert float(agg.hidden.std()) == pytest.approx(plan.sigma_hidden, rel=0.02)
    # P(N(r − σ₁, σ₁²) ≥ r) = 1 − Φ(1) = 0.1587; with σ₁/4 it would be ≈ 0
    answered = float(agg.answered.float().mean())
    assert answered == pytest.approx(0.5 * math.erfc(1 / math.sqrt(2)), abs=0.02)
    assert torch.equal(agg.labels, agg.soft.argmax(-1))


def test_the_run_draws_the_noise_its_ledger_charges(make_ctx, monkeypatch):
    """Through DPED's own run path: the noise on the released soft sum and hidden means has the
    std implied by the ledger's recorded noise multipliers and the sensitivities."""
    import dpkit_dped.defenses as defenses

    seen = {}

    def spy(vectors, summed, plan, **kwargs):
        seen["summed"], seen["vectors"], seen["clip"] = summed.clone(), vectors.clone(), kwargs["clip"]
        seen["agg"] = aggregate(vectors, summed, plan, **kwargs)
        return seen["agg"]

    monkeypatch.setattr(defenses, "aggregate", spy)
    ctx = make_ctx()
    params = DpedDefense.Params.model_validate({**TEACHER, "num_queries": 32, "target_epsilon": 50.0})
    DpedDefense(params).run(ctx)
    multipliers = {s.label: s.guarantee.event.noise_multiplier for s in ctx.ledger.spends}
    votes = next(z for label, z in multipliers.items() if "probability vectors" in label)
    hidden = next(z for label, z in multipliers.items() if "clipped teacher vectors" in label)
    agg = seen["agg"]
    drawn_votes = float((agg.soft - seen["summed"]).std())
    assert drawn_votes == pytest.approx(votes * VOTES_SENSITIVITY, rel=0.1)
    from dpkit_dped.aggregation import clip_rows

    mean = clip_rows(seen["vectors"], seen["clip"]).mean(0)
    drawn_hidden = float((agg.hidden - mean).std())
    assert drawn_hidden == pytest.approx(hidden * 2 * params.clip / params.teachers, rel=0.15)
