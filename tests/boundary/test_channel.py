"""The server process: built from public things only, answers with bytes, fails loudly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from dpkit.base.errors import ServerError
from dpkit.boundary.channel import InProcessChannel, ProcessChannel
from dpkit.boundary.fork_server import channel_kind
from dpkit.boundary.confine import landlock_abi
from dpkit.release.codec import decode, encode, raise_if_error


def _init(registry, defense="toy_noise", **over):
    init = {"defense": defense, "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 123, "device": "cpu", "plugins": dict(registry.modules)}
    return {**init, **over}


def _ask(channel, request):
    return raise_if_error(decode(channel.request(encode(request))))


def test_a_process_server_keeps_what_arrives_and_tallies_it(toy_registry):
    channel = ProcessChannel(_init(toy_registry))
    try:
        rows = torch.randn(4, 8)
        _ask(channel, {"op": "message", "name": "embeddings", "phase": "test", "batch": 0,
                       "tensor": rows, "mask": None})
        tally = _ask(channel, {"op": "tally"})
        assert tally["messages"] == {"embeddings": 1} and tally["bytes"] == {"embeddings": 128}
        assert len(tally["digests"]["embeddings"]) == 32
        out = _ask(channel, {"op": "attack", "name": "toy_attack", "params": {}, "seed": 1})
        assert out["guesses"].shape == (4,)
        assert channel.pid is not None and channel.pid != __import__("os").getpid()
    finally:
        channel.close()


def test_server_failures_come_back_with_their_traceback(toy_registry):
    channel = ProcessChannel(_init(toy_registry))
    try:
        with pytest.raises(ServerError, match="no handler"):
            _ask(channel, {"op": "message", "name": "nothing", "phase": "run", "batch": 0,
                           "tensor": None, "mask": None})
        with pytest.raises(ServerError, match="unknown attack|ComponentNotFound"):
            _ask(channel, {"op": "attack", "name": "no_such_attack", "params": {}, "seed": 0})
    finally:
        channel.close()
    with pytest.raises(ServerError, match="ComponentNotFoundError: unknown defense "
                       "'no_such_defense'") as failed:  # the server's start failed
        ProcessChannel(_init(toy_registry, defense="no_such_defense"))
    assert failed.value.kind == "ComponentNotFoundError"
    assert "Traceback" in failed.value.remote_traceback


def test_a_defense_class_the_registry_does_not_know_runs_in_process(toy_registry):
    from dpkit.testing.toy import ToyNoise

    class Unregistered(ToyNoise):
        name = "unregistered_noise"

    channel = InProcessChannel(_init(toy_registry, defense="unregistered_noise"), toy_registry,
                               Unregistered)
    assert _ask(channel, {"op": "tally"})["messages"] == {}


def test_an_unknown_server_kind_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER", "thread")
    with pytest.raises(ValueError, match="DPKIT_SERVER must be one of process, ray, inprocess, "
                       "got 'thread'"):
        channel_kind()
    monkeypatch.delenv("DPKIT_SERVER")
    assert channel_kind() == "process"


def test_a_server_can_load_only_the_datasets_its_cell_approved(toy_registry):
    host = InProcessChannel(_init(toy_registry), toy_registry).host
    with pytest.raises(Exception, match="did not approve"):
        host.public.load_dataset("toy_text")
    with pytest.raises(Exception, match="mechanisms and attacks only"):
        host.public.build("dataset", "toy_text")
    assert host.public.seed == 123 and host.server.public.model is not None


_PROBE = """
import json, os, sys
from dpkit.boundary.channel import ProcessChannel
from dpkit.contract.plugins import get_registry
from dpkit.release.codec import decode, encode, raise_if_error

spec = json.loads(sys.argv[1])
out = {}
for mode in ("auto", "off"):
    channel = ProcessChannel({**spec["init"], "confine": mode, "plugins": dict(get_registry().modules)})
    ask = {"op": "attack", "name": "path_probe", "params": {"paths": spec["paths"]}, "seed": 0}
    seen = raise_if_error(decode(channel.request(encode(ask))))["guesses"]
    channel.close()
    out[mode] = {**seen, "confinement": channel.confinement, "left": os.path.exists(seen["temp"])}
print(json.dumps(out))
"""


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
def test_a_process_server_cannot_read_the_cells_private_corpus_and_has_its_own_temp(tmp_path):
    cache = tmp_path / "cache"
    files = {name: cache / name / "file" for name in (
        "sources/public", "sources/private", "downloads/pypi/private==1", "shared/client")}
    files["named/public"] = tmp_path / "named" / "public"  # in no root a server may read, but
    # the spec names it as a public input: the server may read it, and only it
    for path in files.values():
        path.parent.mkdir(parents=True)
        path.write_text("x")
    artifacts = cache / "not-yet" / "server-artifacts"  # made by each server, parents too
    init = {"defense": "toy_noise", "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 1, "device": "cpu", "artifacts": str(artifacts),
            "public_paths": [str(files["named/public"])],
            "private_paths": [str(cache / "sources/private"),
                                                  str(cache / "downloads/pypi/private==1")]}
    spec = {"init": init, "paths": {k: str(p) for k, p in files.items()}}
    environ = {**{k: v for k, v in os.environ.items() if k != "DPKIT_SERVER_CONFINE"},
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "DPKIT_CACHE": str(cache),
               "DPKIT_LOAD_PLUGINS": "", "DPKIT_BUDGET_STORE": "off",
               "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,sides=dpkit.testing.side_channels"}
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(spec)], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    confined, control = seen["auto"], seen["off"]
    assert confined["confinement"].startswith("landlock ABI")
    assert confined["read"] == {"sources/public": "ok", "sources/private": "PermissionError",
                                "downloads/pypi/private==1": "PermissionError",
                                "shared/client": "PermissionError", "named/public": "ok"}
    assert set(control["read"].values()) == {"ok"}  # the tries are real: unconfined, all succeed
    for one in (confined, control):  # a temp folder of its own, removed when it ends
        assert Path(one["temp"]).name.startswith("dpkit-server-")
        assert Path(one["temp"]).parent == Path(tempfile.gettempdir())
        assert one["TMPDIR"] == one["temp"] and Path(one["written"]).parent == Path(one["temp"])
        assert not one["left"]
        assert one["shared"] == str(artifacts / "shared")  # dpkit.cached: the server's own folder


CLIENT_PROBE = """
import os, sys
os.environ["DPKIT_LOAD_PLUGINS"] = ""
os.environ["DPKIT_EXTRA_PLUGINS"] = "toy=dpkit.testing.toy"
if __name__ == "__main__":
    import dpkit.contract.plugins
    from dpkit.boundary.channel import ProcessChannel
    from dpkit.boundary.session import close_soon

    registry = dpkit.contract.plugins.get_registry()
    channel = ProcessChannel({"defense": "toy_noise", "params": {}, "model": None,
                              "datasets": [], "seed": 1, "device": "cpu",
                              "plugins": dict(registry.modules)})
    print(channel._scratch, channel.pid, flush=True)
    if sys.argv[1] == "close_soon":
        close_soon(channel)  # the server ends in the background; this process exits at once
    # "exit": exits without closing it, as a crashed client would
"""


def _client_exits(tmp_path, how: str, timeout: float) -> tuple[str, int]:
    """Run a client that starts one server and exits (``close_soon`` or ``exit``); its server's
    temp folder and pid."""
    probe = tmp_path / "probe.py"
    probe.write_text(CLIENT_PROBE)
    done = subprocess.run([sys.executable, str(probe), how], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    scratch, pid = done.stdout.strip().splitlines()[-1].split()
    return scratch, int(pid)


def test_a_server_closed_in_the_background_is_reaped_before_the_client_exits(tmp_path):
    scratch, _ = _client_exits(tmp_path, "close_soon", timeout=300)
    assert scratch.startswith(str(tmp_path)) and not os.path.exists(scratch)


class _Pipe:
    """The server's end of a pipe whose client has sent nothing and closed it."""

    def __init__(self):
        self.sent: list[dict] = []

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(decode(data))

    def recv_bytes(self) -> bytes:
        raise EOFError


@pytest.mark.parametrize("device", ["cuda:1", "cpu", None])
def test_a_servers_device_context_is_made_before_its_confinement(monkeypatch, device):
    """A CUDA context needs files and devices the confinement's rules then close: the server
    opens its cell's device first (on the CPU, nothing to open)."""
    import dpkit.boundary.channel as channel
    import dpkit.boundary.confine as confine

    order: list[tuple] = []
    monkeypatch.setattr(channel, "open_device", lambda d: order.append(("device", d)))
    monkeypatch.setattr(confine, "confine_server", lambda *a: order.append(("confine",)) or "off")
    monkeypatch.setattr(channel, "threads_before_rules",
                        lambda mode: order.append(("alone",)) or " (alone)")
    monkeypatch.setattr(channel, "limit_threads", lambda n: order.append(("threads", n)))

    class Host:
        def __init__(self, payload, prepare):
            prepare(type("Public", (), {"preload": lambda self: order.append(("preload",))})())

    monkeypatch.setattr(channel, "ServerHost", Host)
    pipe = _Pipe()
    channel._answer(pipe, encode({} if device is None else {"device": device}), "/nowhere", 3)
    # the cell's threads, then the public model and datasets: loaded once confined
    assert order == [("device", device or "cpu"), ("alone",), ("confine",), ("threads", 3),
                     ("preload",)]
    assert pipe.sent == [{"ready": True, "confinement": "off (alone)"}]


def test_opening_a_device_allocates_on_that_device_and_only_for_cuda(monkeypatch):
    from dpkit.boundary.channel import open_device

    made: list = []
    real = torch.zeros

    def zeros(*shape, device=None):  # records the device; the call must be a valid allocation
        made.append(device)
        return real(*shape, device="cpu")

    monkeypatch.setattr(torch, "zeros", zeros)
    for device in ("cpu", "cuda:2", "cuda"):
        open_device(device)
    assert made == ["cuda:2", "cuda"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_opening_a_cuda_device_makes_its_context():
    from dpkit.boundary.channel import open_device

    open_device("cuda")
    assert torch.cuda.is_initialized()


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_client_that_exits_without_closing_its_server_ends_it_and_does_not_wait(tmp_path):
    _, pid = _client_exits(tmp_path, "exit", timeout=120)  # a client that waited would time out
    for _ in range(100):
        if _ended(pid):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the server outlived its client")


@pytest.mark.parametrize("asked, environment, refused", [
    ("auto", "off", True), ("require", "off", True), ("off", "auto", False), (None, "auto", True),
    (None, "off", False)])
def test_a_server_forked_from_a_threaded_fork_server_refuses_by_its_cells_mode(
        monkeypatch, asked, environment, refused):
    """The cell's confinement mode (the client's, in the init; else this process's) decides:
    a fork server with threads forks no confined server."""
    import dpkit.boundary.channel as channel
    from dpkit.boundary import fork_check

    monkeypatch.setattr(fork_check, "THREADS", ["lurker"])
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", environment)
    built = []
    monkeypatch.setattr(channel, "ServerHost", lambda payload, prepare: built.append(payload))
    pipe = _Pipe()
    channel._answer(pipe, encode({} if asked is None else {"confine": asked}), "/nowhere")
    if refused:
        assert built == [] and pipe.sent == [{
            "__error__": "RuntimeError", "message": fork_check.refusal("auto"),
            "traceback": pipe.sent[0]["traceback"]}]
        assert "RuntimeError: the fork server had 1 thread(s)" in pipe.sent[0]["traceback"]
    else:
        assert len(built) == 1  # not refused: it went on to build its host


def test_the_threads_before_the_rules_are_judged_by_the_cells_mode(monkeypatch):
    import dpkit.boundary.channel as channel
    import dpkit.boundary.confine as confine

    modes = []
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "auto")
    monkeypatch.setattr(confine, "confine_server", lambda *a: "off")
    monkeypatch.setattr(channel, "threads_before_rules", lambda mode: modes.append(mode) or "")
    monkeypatch.setattr(channel, "limit_threads", lambda n: None)

    class Host:
        def __init__(self, payload, prepare):
            prepare(type("Public", (), {"preload": lambda self: None})())

    monkeypatch.setattr(channel, "ServerHost", Host)
    channel._answer(_Pipe(), encode({"confine": "require"}), "/nowhere")
    assert modes == ["require"]
