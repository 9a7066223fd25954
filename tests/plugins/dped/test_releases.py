"""What DPED's defenses declare and send (dpkit_dped/releases.py), on a wire over a recording channel:
each release is named after the channel whose planned spend it carries, the sends cross under
those names and stay within what was declared (no ∞ excess), and only the answered queries'
outputs and hidden means cross. Kills the mutants the law and plan tests cannot see
(tools/mutation.toml)."""

from __future__ import annotations

import math

import dp_accounting
import pytest
import torch

from dpkit import DpGuarantee, NoGuarantee
from dpkit.accounting import Ledger
from dpkit.release.declaration import Release
from dpkit.testing.boundary import recording_wire
from dpkit_dped.privacy import NoisePlan, noiseless_plan
from dpkit_dped.releases import (
    ANSWERS,
    GRADIENT,
    HIDDEN,
    MODEL,
    THRESHOLD,
    as_release,
    gradient_sender,
    query_releases,
    send_answers,
    send_models,
)
from dpkit_dped.skipgram import WordModel

QUERIES = 6
NOISY = NoisePlan(queries=QUERIES, sigma_threshold=2.0, sigma_votes=3.0, sigma_hidden=0.5,
                  hidden_sens=0.25, target="soft")
FAITHFUL = NoisePlan(queries=QUERIES, sigma_threshold=None, sigma_votes=3.0, sigma_hidden=0.5,
                     hidden_sens=0.25, faithful=True)
PATE = NoisePlan(queries=QUERIES, sigma_threshold=2.0, sigma_votes=3.0)


def gaussian(z: float) -> DpGuarantee:
    return DpGuarantee(dp_accounting.GaussianDpEvent(z))


def test_a_release_carries_its_planned_spend_under_its_name():
    spend = (gaussian(2.0), "votes", 7)
    assert as_release("answers", spend) == Release("answers", gaussian(2.0), "votes", 7)
    assert as_release("answers", spend).unit == "row" and as_release("answers", spend).covers is None
    assert as_release(GRADIENT, spend, unit="send", covers=9) == Release(
        GRADIENT, gaussian(2.0), "votes", 7, covers=9, unit="send")


def test_each_noisy_channel_is_released_under_its_own_name_with_its_own_event():
    releases = query_releases(NOISY)
    assert [r.name for r in releases] == [THRESHOLD, ANSWERS, HIDDEN]
    # the threshold check (Δ = 1), the summed outputs (Δ = √2), the hidden mean (Δ = 2C/N)
    assert [r.guarantee for r in releases] == [gaussian(2.0), gaussian(3.0 / math.sqrt(2)),
                                               gaussian(0.5 / 0.25)]
    assert all(r.count == QUERIES and r.unit == "row" and r.covers is None for r in releases)
    assert [(r.guarantee, r.label, r.count) for r in releases] == NOISY.spends()
    assert [r.name for r in query_releases(PATE)] == [THRESHOLD, ANSWERS]
    assert [r.guarantee for r in query_releases(PATE)] == [gaussian(2.0),
                                                           gaussian(3.0 / math.sqrt(2))]


def test_the_faithful_threshold_is_released_as_its_infinite_entry():
    releases = query_releases(FAITHFUL)
    assert [r.name for r in releases] == [THRESHOLD, ANSWERS, HIDDEN]
    assert isinstance(releases[0].guarantee, NoGuarantee)
    assert releases[1].guarantee == gaussian(3.0 / math.sqrt(2)) and releases[1].count == QUERIES


@pytest.mark.parametrize("hidden", [True, False])
def test_a_noiseless_plan_releases_one_infinite_entry_per_channel(hidden):
    releases = query_releases(noiseless_plan(QUERIES, hidden=hidden, hidden_sens=0.25))
    assert [r.name for r in releases] == [THRESHOLD, ANSWERS] + ([HIDDEN] if hidden else [])
    assert all(isinstance(r.guarantee, NoGuarantee) for r in releases)


def test_a_plan_whose_spends_the_channels_cannot_name_is_refused():
    class Extra(NoisePlan):
        def spends(self):
            return super().spends() + [(gaussian(1.0), "unnamed", QUERIES)]

    with pytest.raises(ValueError, match=r"3 spends cannot name its channels \['threshold', "
                                         r"'answers'\].*disagree"):
        query_releases(Extra(queries=QUERIES, sigma_threshold=2.0, sigma_votes=3.0))
    altered = NoisePlan(queries=QUERIES, sigma_threshold=2.0, sigma_votes=3.0, sigma_hidden=0.5,
                        hidden_sens=0.25)
    object.__setattr__(altered, "sigma_threshold", None)  # a plan altered after its checks
    with pytest.raises(ValueError, match="disagree"):  # never the votes declared as the threshold
        query_releases(altered)


def _declared(plan: NoisePlan):
    ledger = Ledger(1e-5)
    wire, channel = recording_wire(*query_releases(plan), ledger=ledger)
    return wire, channel, ledger, ledger.epsilon()


@pytest.mark.parametrize("hidden", [True, False])
def test_only_the_answered_queries_outputs_cross_and_the_declarations_cover_them(hidden):
    wire, channel, ledger, declared = _declared(NOISY if hidden else PATE)
    answered = torch.tensor([0, 1, 1, 0, 0, 1])
    outputs = torch.arange(QUERIES * 4, dtype=torch.float32).reshape(QUERIES, 4)
    means = -torch.arange(QUERIES * 3, dtype=torch.float32).reshape(QUERIES, 3) if hidden else None
    kept, sent_outputs, sent_means = send_answers(wire, answered, outputs, means)
    assert torch.equal(kept, torch.tensor([1, 2, 5]))
    assert torch.equal(sent_outputs, outputs[[1, 2, 5]])
    assert [m["name"] for m in channel.got] == [THRESHOLD, ANSWERS] + ([HIDDEN] if hidden else [])
    assert torch.equal(channel.got[0]["tensor"], answered)  # every query's flag
    assert torch.equal(channel.got[1]["tensor"], outputs[[1, 2, 5]])
    if hidden:
        assert torch.equal(sent_means, means[[1, 2, 5]])
        assert torch.equal(channel.got[2]["tensor"], means[[1, 2, 5]])
    else:
        assert sent_means is None
    assert wire.units[THRESHOLD] == QUERIES and wire.units[ANSWERS] == 3
    assert ledger.epsilon() == declared and math.isfinite(declared)  # nothing crossed uncovered


def test_one_answered_query_crosses_as_one_row():
    wire, channel, _, _ = _declared(NOISY)
    kept, outputs, means = send_answers(wire, torch.tensor([0, 0, 0, 1, 0, 0]),
                                        torch.ones(QUERIES, 4), torch.ones(QUERIES, 3))
    assert kept.shape == (1,) and outputs.shape == (1, 4) and means.shape == (1, 3)
    assert channel.got[1]["tensor"].shape == (1, 4)


def test_each_step_sends_its_noisy_gradients_once():
    steps = 3
    ledger = Ledger(1e-5)
    wire, channel = recording_wire(as_release(GRADIENT, (gaussian(1.0), "step", steps),
                                              unit="send"), ledger=ledger)
    declared = ledger.epsilon()
    release = gradient_sender(wire)
    for step in range(steps):
        grads = [torch.full((4, 2), float(step)), torch.arange(8.0).reshape(4, 2) + step]
        crossed = release(grads)
        assert len(crossed) == 2 and all(torch.equal(c, g) for c, g in zip(crossed, grads))
        assert torch.equal(channel.got[-1]["tensor"], torch.stack(grads))
    assert [m["name"] for m in channel.got] == [GRADIENT] * steps
    assert wire.units[GRADIENT] == steps and ledger.epsilon() == declared


def test_trained_models_cross_in_one_send_and_come_back_whole():
    ledger = Ledger(1e-5)
    wire, channel = recording_wire(as_release(MODEL, (NoGuarantee("reference"), "model", 1),
                                              unit="send"), ledger=ledger)
    g = torch.Generator().manual_seed(0)
    models = [WordModel(torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g),
                        torch.randn(5, generator=g)) for _ in range(3)]
    crossed = send_models(wire, models)
    assert [m["name"] for m in channel.got] == [MODEL] and wire.units[MODEL] == 1
    assert torch.equal(channel.got[0]["tensor"],
                       torch.stack([t for m in models for t in (m.vectors, m.out_vectors)]))
    assert len(crossed) == len(models)
    copies = [(m.vectors.clone(), m.out_vectors.clone()) for m in models]
    for model in models:  # the client reuses its buffers: what is returned is what crossed
        model.vectors.zero_()
        model.out_vectors.zero_()
    for sent, model, (vectors, out_vectors) in zip(crossed, models, copies):
        assert torch.equal(sent.vectors, vectors)
        assert torch.equal(sent.out_vectors, out_vectors)
        assert sent.out_bias is model.out_bias
