"""HiddenEcho's client declaration: the η-dχ mechanism it builds (or the noiseless ceiling) and
what it declares before sending: every token it privatizes, the gradients and the schedule."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_hiddenecho.data import privatize_split, validation_size
from dpkit_hiddenecho.defense import GRADIENTS_REASON, SCHEDULE_REASON, dx_mechanism

import dpkit
from dpkit.accounting import MetricDpGuarantee
from dpkit.contract.plugins import get_registry
from dpkit.models import tiny_encoder
from dpkit.testing.params_contract import tiny_context

from .test_defense import toy_dataset

SMALL = {"eta": 40.0, "epochs": 2, "batch_size": 4, "train_examples": 20, "test_examples": 6,
         "max_length": 7}


@pytest.fixture(scope="module")
def model():
    return tiny_encoder(16, 1, 2, 0)


def declared(model, **params):
    """(the defense, its context, its releases by name) for ``hiddenecho_ldp`` at ``params``."""
    ctx = tiny_context(model, toy_dataset())
    defense = get_registry().build("defense", "hiddenecho_ldp", {**SMALL, **params})
    return defense, ctx, {r.name: r for r in defense.releases(ctx)}


def test_a_finite_eta_builds_laplace_dx_at_that_eta_and_clip_bound(model):
    ctx = tiny_context(model, toy_dataset())
    clipped = dx_mechanism(ctx, "he", 3.0, 0.5)
    assert clipped.name == "laplace_dx" and clipped.params.eta == 3.0
    assert clipped.clip_bound == 0.5
    unclipped = dx_mechanism(ctx, "he", 3.0)
    assert unclipped.params.eta == 3.0 and unclipped.clip_bound is None
    space = model.as_space()
    assert clipped.guarantee(space) == MetricDpGuarantee(3.0, "l2", space.name, "token")


def test_eta_infinity_is_the_noiseless_ceiling_declared_as_no_guarantee(model):
    ctx = tiny_context(model, toy_dataset())
    ceiling = dx_mechanism(ctx, "hiddenecho_ldp", math.inf, 0.5)
    assert isinstance(ceiling, dpkit.Noiseless) and ceiling.bound == 0.5
    assert ceiling.guarantee().notion == "none"
    assert "hiddenecho_ldp" in ceiling.reason and "without noise" in ceiling.reason
    x = 3 * torch.ones(2, 4)
    assert torch.allclose(ceiling.privatize(x).norm(dim=-1), torch.full((2,), 0.5))  # still clipped
    assert dx_mechanism(ctx, "he", math.inf).bound is None


def test_every_privatized_token_of_both_splits_is_declared_at_the_mechanisms_eta(model):
    defense, ctx, out = declared(model)
    st = defense._prepared(ctx)
    space = model.as_space()
    privatized = sum(privatize_split(model, st.ids[s], st.texts[s][1], st.mechanism, space,
                                     torch.Generator().manual_seed(0)).n_tokens
                     for s in ("train", "test"))
    embeddings = out["embeddings"]
    assert embeddings.count == privatized > 20 + 6
    assert embeddings.guarantee == MetricDpGuarantee(40.0, "l2", space.name, "token")
    assert embeddings.reusable and embeddings.padding == 0.0 and embeddings.unit == "row"
    assert "laplace_dx η=40" in embeddings.label


def test_the_gradients_and_the_schedule_are_declared_uncovered_with_their_counts(model):
    _, _, out = declared(model, val_fraction=0.2)
    fit = 20 - validation_size(20, 0.2)
    assert out["gradients"].count == 2 * math.ceil(fit / 4)
    assert out["gradients"].guarantee.reason.endswith(GRADIENTS_REASON)
    assert out["gradients"].unit == out["schedule"].unit == "send"
    assert out["schedule"].guarantee.reason.endswith(SCHEDULE_REASON)
    assert out["schedule"].count == 1
    _, _, stopping = declared(model, patience=2)
    assert stopping["schedule"].count == 2  # and the epoch kept


def test_the_noiseless_ceiling_declares_its_tokens_with_no_guarantee(model):
    _, _, out = declared(model, eta=math.inf)
    assert out["embeddings"].guarantee.notion == "none"
    assert out["embeddings"].count > 26
