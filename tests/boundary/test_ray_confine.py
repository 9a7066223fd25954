"""A Ray actor's server (``--executor ray``) is confined as a process server is: an attack run
where the server is cannot read a file the client left in ``/tmp``, the run's noise secret, the
client's memory or Ray's own session files, cannot write into the client's artifacts or output
folder, and cannot open a TCP connection to Ray itself (whose API would start unconfined code).
With ``DPKIT_SERVER_CONFINE=off`` each route works, so the refusals are the confinement's."""

from __future__ import annotations

import ctypes
import os
import secrets
import sys
import tempfile
from pathlib import Path

import pytest

import dpkit.contract.plugins
from dpkit.base.errors import ServerError
from dpkit.boundary.confine import landlock_abi
from dpkit.release.codec import decode, encode, raise_if_error
from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.testing.side_channels import client_memory_readable_unconfined
from dpkit.boundary import seccomp

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or landlock_abi() == 0,
                                reason="server confinement needs Linux with Landlock")
DENIED = "PermissionError"
ROUTES = ("read temp file", "read noise secret", "read ray session", "write artifacts",
          "write output", "memory", "tcp")


@pytest.fixture(scope="module")
def ray_plugins():
    """One local Ray for the module; the toy plug-in and the side-channel probes."""
    pytest.importorskip("ray")
    from dpkit.testing.boundary import local_ray

    with local_ray("toy=dpkit.testing.toy,sides=dpkit.testing.side_channels",
                   DPKIT_BUDGET_STORE="off") as ray:
        yield ray


def _client_places(root: Path, ray) -> tuple[dict, dict]:
    """What a client leaves around (a temp file, the noise secret, its artifacts, its memory) and
    the route probe's params aimed at each."""
    rows = f"client rows {secrets.token_hex(8)}"
    temp = Path(tempfile.gettempdir()) / f"dpkit-ray-client-{os.getpid()}-{secrets.token_hex(4)}"
    temp.write_text(rows)
    out, artifacts = root / "out", root / "cache" / "artifacts"
    out.mkdir(parents=True)
    artifacts.mkdir(parents=True)
    (out / SECRET_FILE).write_text(secrets.token_hex(32))
    memory = ctypes.create_string_buffer(rows.encode())
    session = Path(ray._private.worker.global_worker.node.get_session_dir_path())
    ray_file = next(p for p in sorted((session / "logs").iterdir()) if p.is_file())
    host, port = ray.get_runtime_context().gcs_address.rsplit(":", 1)
    params = {"read": {"temp file": str(temp), "noise secret": str(out / SECRET_FILE),
                       "ray session": str(ray_file)},
              "write": {"artifacts": str(artifacts / "planted"), "output": str(out / SECRET_FILE)},
              "memory": [os.getpid(), ctypes.addressof(memory), len(rows)],
              "tcp": [host, int(port)]}
    return params, {"rows": rows, "temp": temp, "secret": (out / SECRET_FILE).read_text(),
                    "artifacts": artifacts, "out": out, "memory": memory}


def _probe(ray, root: Path, mode: str) -> dict:
    """Start a Ray server with confinement ``mode``, run the route probe there, close it."""
    from dpkit.boundary.ray_channel import RayChannel

    params, client = _client_places(root, ray)
    init = {"defense": "toy_noise", "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 1, "device": "cpu", "confine": mode,
            "plugins": dict(dpkit.contract.plugins.get_registry().modules)}
    channel = RayChannel(init, preload=["dpkit.testing.side_channels"])
    try:
        pids = ray.get(channel._actor.pids.remote())
        ask = {"op": "attack", "name": "route_probe", "params": params, "seed": 0}
        seen = raise_if_error(decode(channel.request(encode(ask))))["guesses"]
        temp = raise_if_error(decode(channel.request(encode(
            {"op": "attack", "name": "path_probe", "params": {}, "seed": 0}))))["guesses"]["temp"]
    finally:
        channel.close()
        client["temp"].unlink()
    return {**seen, "confinement": channel.confinement, "pids": pids, "server temp": temp,
            "channel": channel, "client": client}


def _ends(pid: int, within: float = 15.0) -> bool:
    """Whether process ``pid`` is gone (or a zombie) within ``within`` seconds."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def probed(ray_plugins, tmp_path_factory):
    """The route probe's findings through a confined Ray server and an unconfined one."""
    return {mode: _probe(ray_plugins, tmp_path_factory.mktemp(mode), mode)
            for mode in ("auto", "off")}


def test_a_ray_server_runs_confined_in_a_process_under_its_actor_and_ends_with_it(probed,
                                                                                  ray_plugins):
    confined, control = probed["auto"], probed["off"]
    assert confined["confinement"] == f"landlock ABI {landlock_abi()}; {seccomp.DESCRIPTION}"
    assert control["confinement"] == "unconfined: DPKIT_SERVER_CONFINE=off"
    for one in (confined, control):
        actor, server = one["pids"]
        assert len({actor, server, os.getpid()}) == 3  # the server is not Ray's worker process
        assert _ends(actor) and _ends(server)  # Ray's worker exits when killed
        assert Path(one["server temp"]).name.startswith("dpkit-server-")
        assert not Path(one["server temp"]).exists()  # removed when the server ended
        with pytest.raises(ray_plugins.exceptions.RayActorError):  # killed, never restarted
            one["channel"].request(encode({"op": "tally"}))


def test_a_confined_ray_server_reads_no_client_file_no_secret_no_ray_session(probed):
    tried = probed["auto"]["tried"]
    assert {tried[f"read {name}"] for name in ("temp file", "noise secret", "ray session")} == {
        DENIED}
    assert probed["auto"]["got"] == {}


def test_a_confined_ray_server_cannot_read_the_clients_memory(probed):
    assert probed["auto"]["tried"]["memory"] == DENIED


def test_a_confined_ray_server_writes_neither_the_clients_artifacts_nor_its_output(probed):
    tried, client = probed["auto"]["tried"], probed["auto"]["client"]
    assert (tried["write artifacts"], tried["write output"]) == (DENIED, DENIED)
    assert not (client["artifacts"] / "planted").exists()
    assert (client["out"] / SECRET_FILE).read_text() == client["secret"]


def test_a_confined_ray_server_cannot_connect_to_ray_itself(probed):
    assert probed["auto"]["tried"]["tcp"] == DENIED  # no ray.init: no unconfined task to start


def test_control_an_unconfined_ray_server_takes_every_route(probed):
    seen, client = probed["off"], probed["off"]["client"]
    expected = set(ROUTES) - (set() if client_memory_readable_unconfined() else {"memory"})
    assert {route for route, how in seen["tried"].items() if how == "ok"} >= expected
    assert seen["got"]["read temp file"] == client["rows"]
    assert seen["got"]["read noise secret"] == client["secret"]
    assert (client["artifacts"] / "planted").read_text() == "written by the server"
    assert (client["out"] / SECRET_FILE).read_text() == "written by the server"
    if "memory" in expected:
        assert seen["got"]["memory"] == client["rows"]


def test_a_ray_server_that_cannot_start_is_reported_and_its_actor_killed(ray_plugins):
    from dpkit.boundary.ray_channel import RayChannel

    init = {"defense": "no_such_defense", "params": {}, "model": None, "datasets": [],
            "seed": 1, "device": "cpu", "plugins": dict(dpkit.contract.plugins.get_registry().modules)}
    with pytest.raises(ServerError, match="ComponentNotFoundError: unknown defense "
                       "'no_such_defense'") as failed:
        RayChannel(init)
    assert failed.value.kind == "ComponentNotFoundError"
    assert "Traceback" in failed.value.remote_traceback


def test_a_ray_cells_server_cannot_replace_the_runs_noise_secret(ray_plugins, tmp_path):
    from dpkit.runner import run_spec
    from dpkit.spec import load_spec

    out = tmp_path / "out"
    path = tmp_path / "spec.yaml"
    path.write_text(f"""name: ray-secret
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: leak_replace_secret, params: {{out: '{out}'}}}}
attacks: [{{name: toy_attack}}]
seeds: [0]
device: cpu
output: {out}
""")
    registry = dpkit.contract.plugins.get_registry()
    outcome = run_spec(load_spec(path, registry=registry), executor="ray", retries=0,
                       show_progress=False, registry=registry)
    [(cell, error)] = outcome.failures  # the client ran; its server's write was refused
    assert cell.method == "leak_replace_secret" and "Permission denied" in error, error
    assert "reads only code, system folders and public inputs" in error
    assert (out / SECRET_FILE).read_text().strip() != "0" * 64
