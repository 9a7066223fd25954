"""What the server process is given (public things only), where it starts, what is asked of it,
the cross-check of what arrived against the meter; and the early start: the runner starts a cell's
server process before the client's first send, which uses it only when it was built from what the
send would use."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.base.errors import ServerError
from dpkit.boundary import session
from dpkit.boundary.channel import InProcessChannel
from dpkit.boundary.public import PrivateDataError
from dpkit.boundary.session import (approved_datasets, connector, cross_check, init_payload,
                                    privacy_of, private_cache_paths, remote_attack, tally)
from dpkit.contract.context import RunContext
from dpkit.contract.privacy import PrivacySettings
from dpkit.release.codec import decode, encode
from dpkit.runner.cell import open_cell
from dpkit.spec import load_spec
from dpkit.spec.cells import expand
from dpkit.boundary import seccomp


def _ctx(registry, tmp_path, **over):
    args = {"dataset": None, "model": None, "device": torch.device("cpu"), "seed": 7,
            "ledger": Ledger(3e-6, accountant="pld"), "registry": registry,
            "cache_dir": tmp_path / "cache" / "artifacts"}
    return RunContext(**{**args, **over})


def test_the_server_is_built_from_public_things_only(toy_registry, tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "require")
    model = tmp_path / "model"
    model.mkdir()
    ctx = _ctx(toy_registry, tmp_path, options={"record_uploads": 1},
               model_ref={"name": "toy_space", "params": {"path": str(model)}})
    defense = toy_registry.build("defense", "toy_noise", {"eta": 2.0})
    init = init_payload(defense, ctx)
    assert init == {
        "defense": "toy_noise", "params": defense.params.model_dump(mode="json"),
        "model": ctx.model_ref, "datasets": [], "device": "cpu",
        "seed": ctx.server_seed,  # derived: the client's own draws cannot be regenerated from it
        "privacy": {"delta": 3e-6, "accountant": "pld"},
        "plugins": dict(toy_registry.modules),
        "artifacts": str(tmp_path / "cache" / "server-artifacts"),  # not the client's artifacts
        "public_paths": [str(model.resolve())], "record": True, "confine": "require",
        "private_paths": []}
    assert init["seed"] != ctx.seed and init["artifacts"] != str(ctx.cache_dir)
    assert decode(encode(init)) == init  # data only: it crosses as bytes


def test_the_spec_privacy_settings_reach_the_server_as_stated(toy_registry, tmp_path):
    settings = PrivacySettings(delta=1e-7, accountant="pld", neighboring="replace_one")
    ctx = _ctx(toy_registry, tmp_path, privacy=settings)
    init = init_payload(toy_registry.build("defense", "toy_noise", {}), ctx)
    assert init["privacy"] == settings.model_dump(mode="json")
    assert init["record"] is False


def test_a_public_dataset_sharing_records_with_the_private_one_is_refused(toy_registry, tmp_path):
    private = toy_registry.build("dataset", "toy_text", {}).load()
    ctx = _ctx(toy_registry, tmp_path, dataset=private)
    defense = toy_registry.build("defense", "leak_private_data", {})
    with pytest.raises(PrivateDataError, match=r"asks for dataset 'toy_text', which shares \d+ "
                       r"records with the cell's private dataset 'toy_text'; a server may only load public"):
        approved_datasets(defense, ctx)
    assert approved_datasets(defense, _ctx(toy_registry, tmp_path)) == [
        {"name": "toy_text", "params": {"n_docs": 48}}]  # no private dataset: nothing to share


class _Told:
    """A channel whose server says ``arrived`` (messages, bytes) when asked for its tally."""

    def __init__(self, messages: dict, nbytes: dict):
        self.arrived = {"messages": messages, "bytes": nbytes, "digests": {}}

    def request(self, data: bytes) -> bytes:
        assert decode(data) == {"op": "tally", "final": True}  # the runner's: nothing after it
        return encode(self.arrived)


def _wire(messages: dict, up: dict, down: dict):
    totals = {**{("run", "up", k): n for k, n in up.items()},
              **{("run", "down", k): n for k, n in down.items()}}
    return SimpleNamespace(_meter=SimpleNamespace(messages=messages, totals=totals),
                           ledger=Ledger(1e-5))


def test_what_arrived_as_the_meter_counted_charges_nothing():
    wire = _wire({"rows": 2, "ask": 1, "idle": 0}, {"rows": 256, "ask": 0}, {"rows": 999, "ask": 64})
    assert cross_check(_Told({"rows": 2, "ask": 1}, {"rows": 256}), wire) == []
    assert wire.ledger.spends == ()


def test_a_ledger_without_its_settings_gives_the_server_the_defaults():
    assert privacy_of(SimpleNamespace(privacy=None, ledger=object())) == {"delta": 1e-5,
                                                                         "accountant": "rdp"}


@pytest.mark.parametrize("messages, nbytes, odd", [
    ({"rows": 3, "ask": 1}, {"rows": 256}, ["rows"]),              # one message more
    ({"rows": 2, "ask": 1}, {"rows": 257}, ["rows"]),              # one byte more
    ({"rows": 2, "ask": 1, "side": 1}, {"rows": 256}, ["side"]),   # a name the meter never saw
    ({"rows": 2}, {"rows": 256, "ask": 8}, ["ask"]),               # bytes on a bodiless request
    ({"rows": 1, "ask": 0}, {"rows": 128}, ["ask", "rows"]),       # fewer: the meter is off too
    ({"rows": 2}, {"rows": 256}, ["ask"])])                        # a metered request never came
def test_what_arrived_outside_the_wire_is_named_and_charged_infinite(messages, nbytes, odd):
    wire = _wire({"rows": 2, "ask": 1}, {"rows": 256, "ask": 0}, {"rows": 999})
    assert cross_check(_Told(messages, nbytes), wire) == odd
    assert [s.label for s in wire.ledger.spends] == [f"{name} (outside the wire)" for name in odd]
    assert wire.ledger.epsilon() == math.inf
    name = odd[0]
    counted = {"rows": (2, 256), "ask": (1, 0), "side": (0, 0)}[name]
    assert wire.ledger.spends[0].guarantee.reason == (
        f"{name}: the server received {messages.get(name, 0)} message(s), {nbytes.get(name, 0)} "
        f"bytes, but the runner's wire metered {counted[0]} message(s), {counted[1]} bytes: "
        "something crossed outside ctx.wire")


def test_the_server_gets_the_public_datasets_it_asked_for(toy_registry, tmp_path):
    init = init_payload(toy_registry.build("defense", "leak_private_data", {}), _ctx(toy_registry, tmp_path))
    assert init["datasets"] == [{"name": "toy_text", "params": {"n_docs": 48}}]
    assert init["public_paths"] == []  # none of their params names a file


class _Started:
    """Stands in for a channel class: records what it was started with."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


@pytest.mark.parametrize("kind, variable, started, device", [
    ("process", "inprocess", "ProcessChannel", "cpu"), (None, "process", "ProcessChannel", "cpu"),
    (None, "ray", "RayChannel", "cpu"), ("ray", "process", "RayChannel", "cuda")])
def test_the_server_starts_where_asked_with_the_public_init(toy_registry, tmp_path, monkeypatch,
                                                            kind, variable, started, device):
    import dpkit.boundary.ray_channel
    import dpkit.boundary.session as session

    monkeypatch.setenv("DPKIT_SERVER", variable)
    monkeypatch.setattr(session, "ProcessChannel", type("ProcessChannel", (_Started,), {}))
    monkeypatch.setattr(dpkit.boundary.ray_channel, "RayChannel", type("RayChannel", (_Started,), {}))
    defense = toy_registry.build("defense", "toy_noise", {})
    ctx = _ctx(toy_registry, tmp_path, device=torch.device(device))
    connect = session.connector(kind)
    end = connect(defense, ctx)
    channel = connect.channel  # the runner's; the wire holds an end of it
    assert isinstance(end, session.ClientEnd) and end._channel is channel
    assert type(channel).__name__ == started
    assert channel.args == (init_payload(defense, ctx),)
    # the fork server (the actor's, for Ray) imports the plug-ins and the defense's modules ahead
    preload = [*sorted(set(toy_registry.modules.values())), "dpkit.testing.toy",
               "dpkit.contract.server"]
    if started == "RayChannel":  # a CUDA cell's actor: one GPU
        assert channel.kwargs == {"num_gpus": int(device == "cuda"), "preload": preload}
    else:  # the send's own start waits for the server
        assert channel.kwargs == {"preload": preload, "wait": True}


def test_an_in_process_server_is_the_defenses_own_class_on_the_cells_registry(toy_registry,
                                                                             tmp_path, monkeypatch):
    from dpkit.testing.toy import ToyNoise

    class Unregistered(ToyNoise):  # a test's defense, which no registry knows by name
        name = "unregistered_noise"

    monkeypatch.setenv("DPKIT_SERVER", "inprocess")
    defense = Unregistered(Unregistered.Params())
    for kind in ("inprocess", None):
        connect = connector(kind)
        end = connect(defense, _ctx(toy_registry, tmp_path))
        channel = connect.channel
        assert isinstance(channel, InProcessChannel) and end.host is channel.host
        assert channel.host.registry is toy_registry
        assert type(channel.host.server).__name__ == "Server"  # the toy's passive server


class _Asked:
    """A channel that keeps each request and answers ``answer``."""

    def __init__(self, answer: dict):
        self.answer, self.requests = answer, []

    def request(self, data: bytes) -> bytes:
        self.requests.append(decode(data))
        return encode(self.answer)


def test_an_attack_runs_where_the_server_is_with_its_name_params_and_seed():
    channel = _Asked({"guesses": torch.arange(3)})
    out = remote_attack(channel, "toy_attack", {"k": 2}, 7)
    assert channel.requests == [{"op": "attack", "name": "toy_attack", "params": {"k": 2},
                                 "seed": 7}]
    assert torch.equal(out["guesses"], torch.arange(3))
    with pytest.raises(ServerError, match="the server raised KeyError: no such thing"):
        remote_attack(_Asked({"__error__": "KeyError", "message": "no such thing"}), "a", {}, 0)


def _defense_whose_server_asks_for(datasets):
    """A toy defense (no registry knows it) whose server asks for ``datasets(params)``."""
    from dpkit.contract.server import Server
    from dpkit.testing.toy import ToyNoise

    class AskingServer(Server):
        @classmethod
        def public_data(cls, params):
            return datasets(params)

    class Asking(ToyNoise):
        name = "asking_noise"
        server = AskingServer

        class Params(ToyNoise.Params):
            window: tuple[int, int] = (1, 2)  # crosses as JSON: a list

    return Asking(Asking.Params(eta=1.0))


def test_a_public_dataset_with_other_records_is_approved_with_its_params(toy_registry, tmp_path):
    defense = _defense_whose_server_asks_for(lambda p: [("toy_text", {"seed": int(p.eta)})])
    private = toy_registry.build("dataset", "toy_text", {}).load()
    ctx = _ctx(toy_registry, tmp_path, dataset=private)
    assert approved_datasets(defense, ctx) == [{"name": "toy_text", "params": {"seed": 1}}]


def test_the_server_may_read_the_files_its_datasets_name_but_not_the_private_corpus(tmp_path):
    local = tmp_path / "local-corpus"
    local.mkdir()
    defense = _defense_whose_server_asks_for(lambda p: [("local", {"files": [str(local)]})])
    corpus = SimpleNamespace(artifact=SimpleNamespace(entry_dir=lambda: "/c/sources/corpus",
                                                      download_dir=lambda: "/c/downloads/corpus"))
    registry = SimpleNamespace(build=lambda kind, name, params: corpus)  # knows no modules
    init = init_payload(defense, _ctx(registry, tmp_path, dataset_ref={"name": "corpus"}))
    assert init["public_paths"] == [str(local.resolve())]
    assert init["private_paths"] == ["/c/sources/corpus", "/c/downloads/corpus"]
    assert init["plugins"] == {}
    assert init["params"] == {"eta": 1.0, "fail": False, "sleep": 0.0, "window": [1, 2]}


def test_the_private_corpus_is_the_artifact_of_the_dataset_the_cell_names():
    built = []

    def build(kind, name, params):
        built.append((kind, name, params))
        folders = SimpleNamespace(entry_dir=lambda: "/c/sources/x", download_dir=lambda: "/c/dl/x")
        return SimpleNamespace(artifact=folders) if name == "pinned" else SimpleNamespace()

    registry = SimpleNamespace(build=build)
    ref = {"name": "pinned", "params": {"split": "b"}}
    assert private_cache_paths(SimpleNamespace(registry=registry, dataset_ref=ref)) == [
        "/c/sources/x", "/c/dl/x"]
    assert built == [("dataset", "pinned", {"split": "b"})]
    unpinned = {"name": "generated"}  # no artifact: nothing to hide
    assert private_cache_paths(SimpleNamespace(registry=registry, dataset_ref=unpinned)) == []
    assert private_cache_paths(SimpleNamespace(registry=registry)) == []  # no dataset named


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
        assert connect.channel is early and opened.ctx.wire._channel._channel is early
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
    used = connect.channel
    assert opened.ctx.wire._channel._channel is used
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


def test_only_a_process_server_starts_early_and_only_once(tmp_path, toy_plugins, monkeypatch):
    """The early start returns at once (the server gets ready on its own), a second start keeps
    the first server, and an in-process or Ray server is never started early."""
    monkeypatch.setenv("DPKIT_SERVER", "process")
    connect, opened = _opened(tmp_path, toy_plugins)
    connect.start(opened.defense, opened.ctx)
    early = connect._early[3]
    try:
        assert early._confinement is None  # not waited for
        connect.start(opened.defense, opened.ctx)
        assert connect._early[3] is early
    finally:
        connect.discard()
    for kind in ("inprocess", "ray"):
        other = connector(kind)
        other.start(opened.defense, opened.ctx)
        assert other._early is None


def test_a_cells_result_names_where_its_server_ran_and_how_it_was_confined():
    from types import SimpleNamespace

    from dpkit.boundary.channel import InProcessChannel, ProcessChannel
    from dpkit.boundary.session import server_description

    assert server_description(None) == ""  # nothing was sent: no server
    local = InProcessChannel.__new__(InProcessChannel)
    assert server_description(local) == "inprocess: not isolated"
    confined = ProcessChannel.__new__(ProcessChannel)
    confined._confinement = f"landlock ABI 7; {seccomp.DESCRIPTION}"
    assert server_description(confined) == f"process: landlock ABI 7; {seccomp.DESCRIPTION}"
    remote = SimpleNamespace(kind="ray", confinement="unconfined: DPKIT_SERVER_CONFINE=off")
    assert server_description(remote) == "ray: unconfined: DPKIT_SERVER_CONFINE=off"

    class Recording:  # a test's stand-in channel, without a kind
        confinement = None

    assert server_description(Recording()) == "Recording: not isolated"


class _Counted:
    """A channel that counts its requests and closes."""

    def __init__(self):
        self.requests, self.closed, self.host = [], 0, "the host"

    def request(self, data: bytes) -> bytes:
        self.requests.append(data)
        return b"answer"

    def close(self) -> None:
        self.closed += 1


def test_the_wires_end_passes_requests_and_close_and_takes_no_attribute():
    """Adversarial: a plug-in that puts its own ``request`` on the object ``ctx.wire.channel()``
    returns (to rewrite the tally, or to send before an attack) is refused; the end forwards."""
    channel = _Counted()
    end = session.ClientEnd(channel)
    assert end.request(b"x") == b"answer" and channel.requests == [b"x"]
    assert end.host == "the host"
    end.close()
    assert channel.closed == 1
    with pytest.raises(AttributeError):
        end.request = lambda data: b"forged"  # type: ignore[method-assign]
    with pytest.raises(AttributeError):
        end.anything = 1  # type: ignore[attr-defined]
    assert session.ClientEnd(object()).host is None


def test_the_runner_keeps_the_channel_it_handed_out(tmp_path, toy_plugins):
    connect, opened = _opened(tmp_path, toy_plugins)
    assert connect.channel is None  # nothing sent yet
    opened.defense.run(opened.ctx)
    try:
        assert connect.channel is not None and connect.channel.kind == "process"
        assert opened.ctx.wire.channel()._channel is connect.channel
    finally:
        connect.channel.close()


def test_the_runners_cross_check_is_its_final_tally():
    channel = _Asked({"messages": {}, "bytes": {}})
    assert tally(channel) == {"messages": {}, "bytes": {}}
    cross_check(channel, _wire({}, {}, {}))
    assert channel.requests == [{"op": "tally"}, {"op": "tally", "final": True}]
