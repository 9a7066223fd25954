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
from dpkit.testing.lurking import lurk_path

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
    lurk_path().write_text("the client's private text")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "DPKIT_LOAD_PLUGINS": "", "DPKIT_BUDGET_STORE": "off",
               "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,lurk=dpkit.testing.lurking",
               "OMP_NUM_THREADS": str(threads)}
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    done = subprocess.run([sys.executable, str(probe), model, mode], env=environ,
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
@pytest.mark.parametrize("mode", ["auto", "require"])
def test_a_model_that_starts_a_thread_when_it_loads_starts_it_under_the_rules(tmp_path, mode):
    seen = _serve(tmp_path, "lurking_space", mode)  # the model loads after the rules
    assert seen["read"] == "PermissionError"
    assert seen["confinement"].startswith("landlock ABI") and "thread" not in seen["confinement"]


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
def test_the_lurking_model_reads_the_file_unconfined(tmp_path):
    control = _serve(tmp_path, "lurking_space", "off")  # the lurker is real: it reads the file
    assert control["read"] == "the client's private text"


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_model_whose_loading_reads_a_private_file_is_refused_confined_and_real(tmp_path, mode):
    seen = _serve(tmp_path, "prying_space", mode)  # reads the file in load(), on the host's thread
    assert seen["read"] == ("the client's private text" if mode == "off" else "PermissionError")


@pytest.mark.skipif(landlock_abi() == 0, reason="server confinement needs Linux with Landlock")
def test_a_confined_server_starts_its_compute_threads_after_the_rules(tmp_path):
    seen = _serve(tmp_path, "toy_space", "auto", threads=2)
    assert seen["confinement"].startswith("landlock ABI") and "thread" not in seen["confinement"]
    assert seen["torch_threads"] == 2  # the client's count, set once confined


def test_a_thread_before_the_rules_is_reported_or_refused_under_require():
    stop = threading.Event()
    birds = [threading.Thread(target=stop.wait, name=f"early-bird-{i}", daemon=True)
             for i in range(2)]
    for bird in birds:
        bird.start()
    try:
        others = other_threads()
        assert {"early-bird-0", "early-bird-1"} <= set(others)
        with pytest.raises(RuntimeError) as refused:
            threads_before_rules("require")
        message = str(refused.value)
        assert f"({', '.join(others)})" in message and "early-bird" in message
        assert "confines the thread that asks" in message and "start threads lazily" in message
        assert message.endswith("or set DPKIT_SERVER_CONFINE=auto to run with them reported")
        note = threads_before_rules("auto")
        assert note == (f" ({len(others)} threads started before the rules, outside them: "
                        f"{', '.join(others)})")
        assert threads_before_rules("off") == ""
    finally:
        stop.set()
        for bird in birds:
            bird.join()


@pytest.fixture
def native_thread():
    """A thread Python does not know (a library's): it waits in ``pause()`` until cancelled."""
    import ctypes

    libc = ctypes.CDLL(None)
    thread = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(thread), None, libc.pause, None) == 0
    yield
    libc.pthread_cancel(thread)
    libc.pthread_join(thread, None)


def test_threads_are_named_by_python_or_else_by_the_kernel_and_one_that_ends_is_skipped(
        monkeypatch, native_thread):
    import dpkit.boundary.threads as threads

    stop = threading.Event()
    named = [threading.Thread(target=stop.wait, name=f"named-{i}", daemon=True) for i in range(3)]
    for thread in named:
        thread.start()
    try:
        tasks = [int(t) for t in os.listdir("/proc/self/task") if int(t) != threading.get_native_id()]
        gone = named[0].native_id  # ends while the names are read; others are listed after it
        assert tasks.index(gone) < len(tasks) - 1

        def read(path, *args, **kwargs):
            if path == f"/proc/self/task/{gone}/comm":
                raise FileNotFoundError(path)
            return open(path, *args, **kwargs)

        monkeypatch.setattr(threads, "open", read, raising=False)
        names = threads.other_threads()
        left = [t for t in tasks if t != gone]
        assert len(names) == len(left) and all(isinstance(n, str) and n for n in names)
        kernel = {t: open(f"/proc/self/task/{t}/comm").read().strip() for t in left}
        python = {t.native_id: t.name for t in threading.enumerate()}
        assert set(left) - set(python)  # the native thread, named by the kernel
        assert sorted(names) == sorted(python.get(t, kernel[t]) for t in left)
    finally:
        stop.set()
        for thread in named:
            thread.join()


def test_helper_threads_stay_off_and_the_cells_threads_are_set_everywhere(tmp_path):
    code = """
import json, os, threading, tqdm, torch
from threadpoolctl import threadpool_info
from dpkit.boundary.threads import THREAD_VARIABLES, limit_threads, quiet_helper_threads
quiet_helper_threads()
bar = tqdm.tqdm(total=2, disable=False, file=open(os.devnull, "w"))
monitor = tqdm.tqdm.monitor is not None
bar.close()
limit_threads(3)
print(json.dumps({"monitor": monitor, "torch": torch.get_num_threads(),
                  "variables": [os.environ[v] for v in THREAD_VARIABLES],
                  "pools": [p["num_threads"] for p in threadpool_info()],
                  "jemalloc": os.environ.get("JE_ARROW_MALLOC_CONF")}))
"""
    environ = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=environ)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["monitor"] is False and seen["torch"] == 3
    assert seen["variables"] == ["3", "3", "3"] and seen["pools"] and set(seen["pools"]) == {3}
    assert seen["jemalloc"] == "background_thread:false"
