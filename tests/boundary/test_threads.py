"""A server is one thread when it confines itself; its compute threads start after the rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from dpkit.boundary.confine import landlock_abi
from dpkit.boundary.threads import other_threads, threads_before_rules

_PROBE = """
import json, os, sys
import torch
from dpkit.boundary.channel import ProcessChannel
from dpkit.contract.plugins import get_registry
from dpkit.release.codec import decode, encode, raise_if_error

if __name__ == "__main__":  # the fork server imports this file again
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    model, mode = sys.argv[1], sys.argv[2]
    init = {"defense": "toy_noise", "params": {}, "model": {"name": model, "params": {}},
            "datasets": [], "seed": 1, "device": "cpu", "confine": mode,
            "plugins": dict(get_registry().modules)}
    try:
        channel = ProcessChannel(init)
    except Exception as exc:
        print(json.dumps({"refused": str(exc)}))
        raise SystemExit
    ask = {"op": "attack", "name": "lurk_probe", "params": {}, "seed": 0}
    seen = raise_if_error(decode(channel.request(encode(ask))))["guesses"]
    channel.close()
    print(json.dumps({**seen, "confinement": channel.confinement}))
"""


def _serve(tmp_path, model: str, mode: str, threads: int = 2) -> dict:
    secret = tmp_path / "private.txt"
    secret.write_text("the client's private text")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "DPKIT_LOAD_PLUGINS": "", "DPKIT_BUDGET_STORE": "off",
               "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,lurk=dpkit.testing.lurking",
               "DPKIT_TEST_LURK_PATH": str(secret), "OMP_NUM_THREADS": str(threads)}
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    done = subprocess.run([sys.executable, str(probe), model, mode], env=environ,
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
def test_a_model_that_starts_a_thread_when_it_loads_is_refused_and_the_thread_is_real(tmp_path):
    refused = _serve(tmp_path, "lurking_space", "auto")
    assert "other thread(s) before it confines itself (lurker)" in refused["refused"]
    control = _serve(tmp_path, "lurking_space", "off")  # unconfined, the lurker reads the file
    assert control["read"] == "the client's private text"


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
def test_a_confined_server_starts_its_compute_threads_after_the_rules(tmp_path):
    seen = _serve(tmp_path, "toy_space", "auto", threads=2)
    assert seen["confinement"].startswith("landlock ABI") and "thread" not in seen["confinement"]
    assert seen["torch_threads"] == 2  # the client's count, set once confined


def test_a_thread_before_the_rules_is_refused_on_a_cpu_and_reported_on_cuda():
    stop = threading.Event()
    waiting = threading.Thread(target=stop.wait, name="early-bird", daemon=True)
    waiting.start()
    try:
        assert "early-bird" in other_threads()
        with pytest.raises(RuntimeError, match=r"before it confines itself \(.*early-bird"):
            threads_before_rules("cpu", "auto")
        with pytest.raises(RuntimeError, match="on CUDA, use auto"):
            threads_before_rules("cuda:0", "require")
        assert "threads of the CUDA driver" in threads_before_rules("cuda:0", "auto")
        assert threads_before_rules("cpu", "off") == ""
    finally:
        stop.set()
        waiting.join()
