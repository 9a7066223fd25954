"""A server cannot reach the client's data through System V shared memory or a POSIX message
queue: an attack plug-in that lists and attaches every segment (dpkit.testing.shared_memory) is
refused confined and reads the client's segment unconfined."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest

from dpkit.boundary.confine import landlock_abi
from dpkit.boundary.seccomp import native_arch
from dpkit.testing.shared_memory import make_segment, remove_segment

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or landlock_abi() == 0 or native_arch() is None,
    reason="server confinement needs Linux with Landlock and seccomp (x86_64 or aarch64)")

SECRET = b"the client's private embeddings"

_PROBE = """
import json, sys
from dpkit.boundary.channel import ProcessChannel
from dpkit.contract.plugins import get_registry
from dpkit.release.codec import decode, encode, raise_if_error

if __name__ == "__main__":  # the fork server imports this file again
    mode, queue = sys.argv[1], sys.argv[2]
    init = {"defense": "toy_noise", "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 1, "device": "cpu", "confine": mode,
            "plugins": dict(get_registry().modules)}
    channel = ProcessChannel(init)
    ask = {"op": "attack", "name": "shared_memory_probe", "params": {"queue": queue}, "seed": 0}
    print(json.dumps(raise_if_error(decode(channel.request(encode(ask))))["guesses"]))
    channel.close()
"""


@pytest.fixture
def client_segment():
    """A shared memory segment of the client holding :data:`SECRET`, and a message queue."""
    try:
        segment = make_segment(SECRET)
    except OSError as exc:
        pytest.skip(f"no System V shared memory here ({exc})")
    libc = ctypes.CDLL(None, use_errno=True)
    queue = f"/dpkit-test-{os.getpid()}".encode()
    fd = libc.mq_open(queue, os.O_CREAT | os.O_RDWR, 0o600, None)
    try:
        yield segment, queue.decode()
    finally:
        remove_segment(segment)
        if fd >= 0:
            os.close(fd)
            libc.mq_unlink(queue)


def _probe(tmp_path, mode: str, queue: str) -> dict:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "DPKIT_LOAD_PLUGINS": "", "DPKIT_BUDGET_STORE": "off",
               "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,ipc=dpkit.testing.shared_memory"}
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    done = subprocess.run([sys.executable, str(probe), mode, queue], env=environ,
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["auto", "require"])
def test_a_confined_server_attaches_no_segment_and_opens_no_queue(tmp_path, client_segment, mode):
    segment, queue = client_segment
    seen = _probe(tmp_path, mode, queue)
    assert seen["segments"][str(segment)] == {"refused": "PermissionError"}
    assert not any("read" in v for v in seen["segments"].values())
    assert seen["queue"] == "EACCES"


def test_unconfined_the_probe_reads_the_clients_segment_and_opens_its_queue(tmp_path,
                                                                             client_segment):
    segment, queue = client_segment
    seen = _probe(tmp_path, "off", queue)
    assert bytes.fromhex(seen["segments"][str(segment)]["read"]).startswith(SECRET)
    assert seen["queue"] == "ok"
