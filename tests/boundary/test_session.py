"""The runner starts a cell's server process before the client's first send (its start overlaps
the client's work), and that send uses it only when it was built from what the send would use."""

from __future__ import annotations

import time

import pytest
import torch

from dpkit.base.errors import ServerError
from dpkit.boundary import session
from dpkit.boundary.public import PrivateDataError
from dpkit.boundary.session import connector, tally
from dpkit.runner.cell import open_cell
from dpkit.spec import load_spec
from dpkit.spec.cells import expand

SPEC = """
name: early
data: {{name: toy_text, params: {{n_docs: 12}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, label: T, params: {{eta: 2.0}}}}
seeds: [0]
device: cpu
output: {out}
"""


def _opened(tmp_path, registry):
    path = tmp_path / "early.yaml"
    path.write_text(SPEC.format(out=tmp_path / "out"))
    [cell] = expand(load_spec(path, registry=registry), registry)
    connect = connector("process")
    opened = open_cell(cell, registry, torch.device("cpu"), connect=connect, noise_secret="s")
    return connect, opened


def _exits(channel, within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while channel._process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not channel._process.is_alive()


def test_the_first_send_uses_the_server_started_early(tmp_path, toy_plugins):
    connect, opened = _opened(tmp_path, toy_plugins)
    connect.start(opened.defense, opened.ctx)
    early = connect._early[3]
    try:
        opened.defense.run(opened.ctx)
        assert opened.ctx.wire._channel is early
        assert tally(early)["messages"] == {"embeddings": 1}
        assert early.confinement  # built and confined (or says why not) before it answered
    finally:
        early.close()


def test_params_changed_after_the_early_start_get_a_server_built_from_them(tmp_path,
                                                                           toy_plugins):
    """Adversarial: a defense that changes its parameters in run() must not talk to a server
    built from the old ones; the early one is ended."""
    connect, opened = _opened(tmp_path, toy_plugins)
    connect.start(opened.defense, opened.ctx)
    early = connect._early[3]
    opened.defense.params = opened.defense.params.model_copy(update={"eta": 7.0})
    opened.defense.run(opened.ctx)
    used = opened.ctx.wire._channel
    try:
        assert used is not early and used.pid != early.pid
        assert tally(used)["messages"] == {"embeddings": 1}
        assert _exits(early)
    finally:
        used.close()


def test_a_server_no_send_used_is_ended(tmp_path, toy_plugins):
    connect, opened = _opened(tmp_path, toy_plugins)
    connect.start(opened.defense, opened.ctx)
    early = connect._early[3]
    connect.discard()
    assert connect._early is None and _exits(early)
    connect.discard()  # a second discard has nothing to end


def test_an_early_start_that_fails_is_raised_by_the_first_send(tmp_path, toy_plugins,
                                                                monkeypatch):
    """A server whose public inputs are refused is refused at the send, as without the early
    start: the early start neither hides the error nor starts a server anyway."""
    def refuse(defense, ctx):
        raise PrivateDataError("toy_noise's server asks for the private dataset")

    monkeypatch.setattr(session, "init_payload", refuse)
    connect, opened = _opened(tmp_path, toy_plugins)
    connect.start(opened.defense, opened.ctx)
    assert connect._early is None
    with pytest.raises(PrivateDataError, match="private dataset"):
        opened.defense.run(opened.ctx)


def test_a_server_that_fails_to_build_is_reported_at_the_first_request(tmp_path, toy_plugins):
    connect, opened = _opened(tmp_path, toy_plugins)
    broken = dict(session.init_payload(opened.defense, opened.ctx), defense="no_such_defense")
    channel = session.ProcessChannel(broken, wait=False)
    try:
        with pytest.raises(ServerError, match="ComponentNotFound|unknown defense"):
            channel.request(b"")
    finally:
        channel.close()
