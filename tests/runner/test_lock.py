"""One run per output folder: a second run refuses (exit 2, naming the holder); SIGKILL frees it."""

from __future__ import annotations

import fcntl
import shutil
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.runner import run_spec
from dpkit.base.errors import OutputLockedError
from dpkit.runner.lock import OutputLock
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry

TOY = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}


def slow_spec(tmp_path, out):
    spec = tmp_path / "slow.yaml"
    spec.write_text(f"""
name: slow
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise, params: {{sleep: 0.6}}, sweep: {{eta: [1, 2, 3, 4, 5, 6]}}}}
device: cpu
output: {out}
""")
    return spec


def keyed_metrics(out):
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["key"]: r["metrics"] for r in rows}, len(rows)


def test_second_run_refuses_and_names_the_holder(toy_spec_text, toy_plugins):
    path, out = toy_spec_text
    with OutputLock(out):
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()} on host"):
            run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert not (out / "results.jsonl").exists()
    registry = get_registry()
    assert run_spec(load_spec(path, registry=registry), show_progress=False,
                    registry=registry).ran == 3  # released on exit


def test_cli_run_into_a_locked_folder_exits_2(tmp_path):
    out = tmp_path / "out"
    spec = slow_spec(tmp_path, out)
    cmd = [sys.executable, "-m", "dpkit.cli.main", "run", str(spec), "--no-progress"]
    with OutputLock(out):
        second = subprocess.run(cmd, env={**os.environ, **TOY}, capture_output=True, text=True,
                                timeout=120)
    assert second.returncode == 2, second.stderr
    assert f"in use by another dpkit run (pid {os.getpid()} on host" in second.stderr
    assert "Traceback" not in second.stderr and not (out / "results.jsonl").exists()


def test_sigkilled_run_leaves_no_blocking_lock_and_resumes_identically(tmp_path, toy_plugins):
    out = tmp_path / "out"
    spec = slow_spec(tmp_path, out)
    cmd = [sys.executable, "-m", "dpkit.cli.main", "run", str(spec), "--no-progress"]
    first = subprocess.Popen(cmd, env={**os.environ, **TOY}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.time() + 600  # a loaded machine starts slowly
    results = out / "results.jsonl"
    while time.time() < deadline and not (results.exists() and results.read_text().strip()):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    _, done = keyed_metrics(out)
    assert 1 <= done < 6
    resumed = run_spec(load_spec(spec, registry=get_registry()), show_progress=False,
                       registry=get_registry())  # would raise if the lock blocked
    assert resumed.ran == 6 - done and resumed.skipped == done
    (tmp_path / "clean").mkdir()  # the same noise secret: the same draws
    shutil.copy(out / SECRET_FILE, tmp_path / "clean" / SECRET_FILE)
    run_spec(load_spec(spec, registry=get_registry()), tmp_path / "clean", show_progress=False,
             registry=get_registry())
    assert keyed_metrics(out) == keyed_metrics(tmp_path / "clean")  # identical, each cell once


def test_fresh_removes_only_what_dpkit_wrote(toy_spec_text, toy_plugins):
    path, out = toy_spec_text
    run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    mine = [out / "figure.png", out / "notes.txt"]
    for f in mine:
        f.write_text("kept")
    again = run_spec(load_spec(path, registry=get_registry()), show_progress=False, fresh=True, registry=get_registry())
    assert again.ran == 3
    assert all(f.read_text() == "kept" for f in mine)
    assert (out / "tradeoff.png").stat().st_size > 0


def _traced_run(tmp_path, out, trace):
    """The command and environment of a slow run over the traced plug-in."""
    spec = tmp_path / "traced.yaml"
    spec.write_text(f"""
name: traced
data: {{name: traced_text}}
model: {{name: traced_space}}
defense: {{name: toy_noise, params: {{sleep: 10}}, sweep: {{eta: [1, 2, 3, 4, 5, 6, 7, 8]}}}}
device: cpu
output: {out}
""")
    env = {**os.environ, "DPKIT_LOAD_PLUGINS": "", "DPKIT_TEST_TRACE": str(trace),
           "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,traced=traced_plugin",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                          os.environ.get("PYTHONPATH", "")])}
    return [sys.executable, "-m", "dpkit.cli.main", "run", str(spec), "--no-progress"], env


def _events(trace, pid):
    lines = trace.read_text().split("\n") if trace.exists() else []
    return [line.split()[0] for line in lines if line.endswith(f" {pid}")]


def test_a_second_process_is_refused_before_it_loads_plugins_data_or_model(tmp_path):
    out, trace = tmp_path / "out", tmp_path / "trace.txt"
    cmd, env = _traced_run(tmp_path, out, trace)
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and "data" not in _events(trace, first.pid):
            time.sleep(0.05)
        assert "data" in _events(trace, first.pid), "the first run never loaded its data"
        second = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        _, err = second.communicate(timeout=120)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        first.kill()
        first.wait(timeout=60)
    assert second.returncode == 2, err
    assert f"in use by another dpkit run (pid {first.pid} on host" in err
    assert _events(trace, second.pid) == [], "the refused run imported a plug-in or loaded data"


def test_a_spec_refused_by_its_check_leaves_no_empty_folder(tmp_path, toy_plugins):
    out = tmp_path / "new" / "out"
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"""
name: bad
data: {{name: toy_text}}
defense: {{name: toy_noize}}
output: {out}
""")
    from dpkit.base.errors import SpecError
    from dpkit.spec import parse_structure, read_yaml

    with pytest.raises(SpecError, match="toy_noise"):
        run_spec(parse_structure(read_yaml(spec), str(spec)), show_progress=False, registry=get_registry())
    assert not out.exists()
    out.mkdir(parents=True)  # a folder that was there before is kept, lock file and all
    with pytest.raises(SpecError):
        run_spec(parse_structure(read_yaml(spec), str(spec)), show_progress=False, registry=get_registry())
    assert out.is_dir()


def test_a_lock_file_replaced_under_a_waiting_run_is_not_trusted(tmp_path, monkeypatch):
    """The textbook unlink race: a run that locked a file which was removed before it checked
    must not believe it holds the folder; it locks the file that is there now."""
    lock = OutputLock(tmp_path / "out")
    real_flock = fcntl.flock
    swapped = []

    def flock_then_swap(fd, op):
        real_flock(fd, op)
        if not swapped:  # another run removes the file between our open and our check
            swapped.append(True)
            lock.path.unlink()
            lock.path.write_text("")

    monkeypatch.setattr(fcntl, "flock", flock_then_swap)
    with lock:
        assert os.fstat(lock._fd).st_ino == os.stat(lock.path).st_ino
    assert swapped
