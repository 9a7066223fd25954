"""One run per output folder: a second run refuses (exit 2, naming the holder); SIGKILL frees it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

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
    deadline = time.time() + 60
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
    run_spec(load_spec(spec, registry=get_registry()), tmp_path / "clean", show_progress=False, registry=get_registry())
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
