"""DP-SGD's model is trained by its server from the noisy gradients that crossed the wire."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped import dpsgd
from dpkit_dped.dpsgd import DpedDpsgd, DpedNonPrivateSgd
from dpkit_dped.releases import GRADIENT, TRAINED
from dpkit_dped.sgd_server import GradientServer

import dpkit

from .conftest import SMALL

RECIPE = {**SMALL, "steps": 12, "sampling_rate": 0.2, "pairs_per_doc": 8}
SGD = {**RECIPE, "target_epsilon": 4.0, "steps_by_epsilon": {4.0: 12}}


def run_capturing_mirror(make_ctx, monkeypatch, cls, params):
    """Run ``cls``; return (the client's own copy of the model, the server, the result)."""
    mirrors = []
    train = dpsgd.train_dpsgd_documents

    def keep(*args, **kwargs):
        mirrors.append(train(*args, **kwargs))
        return mirrors[-1]

    monkeypatch.setattr(dpsgd, "train_dpsgd_documents", keep)
    ctx = make_ctx()
    result = cls(cls.Params.model_validate(params)).run(ctx)
    return mirrors[0], ctx.wire.channel().host.server, result


@pytest.mark.parametrize("init", ["public", "random"])
def test_the_servers_model_is_the_clients_copy(make_ctx, monkeypatch, init):
    mirror, server, _ = run_capturing_mirror(make_ctx, monkeypatch, DpedDpsgd,
                                             {**SGD, "init": init})
    assert isinstance(server, GradientServer) and server.steps == 12
    assert torch.equal(server.tables[0].detach(), mirror.vectors)
    assert torch.equal(server.tables[1].detach(), mirror.out_vectors)
    assert server.view()[GRADIENT].shape[0] == 2 * 12  # every step's two tables, for the attacks


def test_the_server_applies_what_crossed_not_what_the_client_holds(make_ctx, monkeypatch):
    """A gradient changed after it crossed (the client's copy) leaves the server's model alone;
    one changed before it crossed moves it."""
    mirror, server, _ = run_capturing_mirror(make_ctx, monkeypatch, DpedNonPrivateSgd,
                                             {**RECIPE, "init": "public"})
    replay = GradientServer(server.params, server.public)
    sent = server.view()[GRADIENT].view(12, 2, *server.tables[0].shape)
    for i, grads in enumerate(sent):
        replay.receive(dpkit.Message(GRADIENT, "run", i, grads.clone()))
    again = replay.receive(dpkit.Message(TRAINED, "run", 0, None))
    assert torch.equal(again["vectors"], mirror.vectors)
    moved = GradientServer(server.params, server.public)
    for i, grads in enumerate(sent):
        moved.receive(dpkit.Message(GRADIENT, "run", i, grads * (2.0 if i == 5 else 1.0)))
    assert not torch.equal(moved.tables[0].detach(), mirror.vectors)


def test_malformed_or_early_requests_are_refused(make_ctx, monkeypatch):
    _, server, _ = run_capturing_mirror(make_ctx, monkeypatch, DpedDpsgd, {**SGD, "init": "public"})
    fresh = GradientServer(server.params, server.public)
    with pytest.raises(ValueError, match="before any gradient arrived"):
        fresh.receive(dpkit.Message(TRAINED, "run", 0, None))
    with pytest.raises(ValueError, match=r"is \[2, V, d\]"):
        fresh.receive(dpkit.Message(GRADIENT, "run", 0, torch.zeros(3, 4, 5)))
    with pytest.raises(ValueError, match="does not fit the public start"):
        fresh.receive(dpkit.Message(GRADIENT, "run", 0, torch.zeros(2, 7, 8)))
