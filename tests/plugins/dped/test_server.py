"""DPED's and PATE's student is trained by the server, from what crossed the wire and public data."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.pipeline import prepare, public_model
from dpkit_dped.releases import ANSWERS, HIDDEN, STUDENT, THRESHOLD
from dpkit_dped.server import StudentServer, public_start

import dpkit
from dpkit.boundary.public import PrivateDataError

from .conftest import TEACHER, tiny_dataset


def run_and_server(make_ctx, cls=DpedDefense, params=None, private=None):
    """Run a DPED-family defense through the in-process server; return (result, ctx, server)."""
    ctx = make_ctx(private)
    defense = cls(cls.Params.model_validate(params or TEACHER))
    result = defense.run(ctx)
    return result, ctx, ctx.wire.channel().host.server


def test_the_server_trains_the_student_and_keeps_only_the_releases(make_ctx):
    result, ctx, server = run_and_server(make_ctx)
    assert isinstance(server, StudentServer)
    assert set(server.releases) == {THRESHOLD, ANSWERS, HIDDEN}
    assert set(server.view()) == {THRESHOLD, ANSWERS, HIDDEN}
    assert ctx.wire._meter.messages[STUDENT] == 1
    assert result.metrics["informative_outputs"] <= float(server.releases[THRESHOLD].sum())


def test_the_servers_public_model_is_the_clients(make_ctx):
    """The student starts from, and is pulled toward, the model the public-only row evaluates."""
    _, ctx, server = run_and_server(make_ctx)
    p = DpedDefense.Params.model_validate(TEACHER)
    vocab, served = public_start(server.public, p)
    setup = prepare(ctx, p)
    held = public_model(ctx, setup, p)
    assert vocab.words == setup.vocab.words
    assert torch.equal(served.vectors, held.vectors)
    assert torch.equal(served.out_vectors, held.out_vectors)


def test_the_student_depends_on_the_releases_not_on_the_client(make_ctx):
    """Replaying the same releases into a fresh server gives the same student: nothing else the
    client holds reaches it (noiseless, so that every answer is informative)."""
    result, ctx, server = run_and_server(make_ctx, params={**TEACHER, "noiseless": True, "threshold_votes": 0.05})
    assert result.metrics["informative_hidden"] > 0
    fresh = StudentServer(server.params, server.public)
    for name in (THRESHOLD, ANSWERS, HIDDEN):
        fresh.receive(dpkit.Message(name, "train", 0, server.releases[name].clone()))
    again = fresh.receive(dpkit.Message(STUDENT, "train", 0, None))
    first = server.student(dpkit.Message(STUDENT, "train", 0, None))
    assert torch.equal(again["vectors"], first["vectors"])
    other = StudentServer(server.params, server.public)
    for name, tensor in ((THRESHOLD, server.releases[THRESHOLD]),
                         (ANSWERS, server.releases[ANSWERS]), (HIDDEN, -server.releases[HIDDEN])):
        other.receive(dpkit.Message(name, "train", 0, tensor.clone()))
    moved = other.receive(dpkit.Message(STUDENT, "train", 0, None))
    assert not torch.equal(moved["vectors"], first["vectors"])


def test_asking_for_the_student_first_is_refused(make_ctx):
    _, _, server = run_and_server(make_ctx, DpedPate)
    fresh = type(server)(server.params, server.public)
    with pytest.raises(ValueError, match="before 'threshold' arrived"):
        fresh.receive(dpkit.Message(STUDENT, "train", 0, None))
    fresh.receive(dpkit.Message(THRESHOLD, "train", 0, server.releases[THRESHOLD].clone()))
    with pytest.raises(ValueError, match="arrived twice"):
        fresh.receive(dpkit.Message(THRESHOLD, "train", 0, server.releases[THRESHOLD].clone()))


def test_pate_sends_no_hidden_means(make_ctx):
    _, _, server = run_and_server(make_ctx, DpedPate)
    assert set(server.releases) == {THRESHOLD, ANSWERS}


def test_a_public_corpus_that_is_the_private_one_never_reaches_the_server(make_ctx):
    """The server loads its public corpus by name; the runner refuses one sharing records with the
    private data (here: the private corpus is the public one under another name)."""
    private = tiny_dataset("renamed_public", 80, 10, seed=100)
    with pytest.raises(PrivateDataError, match=r"shares \d+ records"):
        run_and_server(make_ctx, private=private)
