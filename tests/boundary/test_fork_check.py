"""The fork server is one thread when it forks servers: a thread a warmed model or a plug-in's
import started there would run unconfined, and every server would inherit what it read."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dpkit.boundary import fork_check, warm
from dpkit.boundary.confine import landlock_abi
from dpkit.testing.lurking import lurk_path

PRIVATE = "the client's private text"
_SPEC = """name: {name}
data: {{name: toy_text}}
model: {{name: {model}}}
defense: {{name: toy_noise}}
attacks: [{{name: lurk_probe}}]
seeds: {seeds}
device: cpu
"""


def _run(tmp_path, name: str, model: str, mode: str, plugins: str,
         seeds: int = 3) -> tuple[list[dict], str]:
    """``dpkit run`` in a fresh process (a fresh fork server, warming the spec's CPU model)."""
    lurk_path().write_text(PRIVATE)
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(_SPEC.format(name=name, model=model, seeds=list(range(seeds))))
    environ = {**os.environ, "DPKIT_SERVER_CONFINE": mode, "DPKIT_LOAD_PLUGINS": "",
               "DPKIT_BUDGET_STORE": "off", "DPKIT_SERVER": "process",
               "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,lurk=dpkit.testing.lurking" + plugins,
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = tmp_path / name
    done = subprocess.run([sys.executable, "-m", "dpkit", "run", str(spec), "--out", str(out),
                           "--no-progress"], env=environ, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return rows, done.stdout + done.stderr


needs_landlock = pytest.mark.skipif(landlock_abi() == 0,
                                    reason="server confinement needs Linux with Landlock")


@needs_landlock
def test_a_warmed_model_that_starts_a_thread_is_not_warmed_and_its_thread_reads_nothing(tmp_path):
    rows, _ = _run(tmp_path, "confined", "lurking_space", "auto", "")
    assert len(rows) == 3 and all(r["metrics"]["read_private_file"] == 0.0 for r in rows)
    assert all(r["server"].startswith("process: landlock ABI") and r["server"].endswith(
        "(models not warmed: the fork server had thread(s) besides its own: lurker)")
        for r in rows)
    control, _ = _run(tmp_path, "unconfined", "lurking_space", "off", "")
    assert [r["metrics"]["read_private_file"] for r in control] == [1.0, 1.0, 1.0]


@needs_landlock
def test_a_plugin_whose_import_starts_a_thread_gets_no_confined_server(tmp_path):
    early = ",early=dpkit.testing.lurking_import"
    rows, said = _run(tmp_path, "confined", "toy_space", "auto", early, seeds=2)
    assert rows == []  # every cell refused
    assert ("the fork server had 1 thread(s) besides its own once it imported the plug-ins "
            "(import-lurker)") in said and "start it lazily" in said
    control, _ = _run(tmp_path, "unconfined", "toy_space", "off", early, seeds=2)
    assert 1.0 in [r["metrics"]["read_private_file"] for r in control]  # the thread is real


@needs_landlock
def test_an_honest_fork_server_warms_its_model_and_names_no_thread(tmp_path):
    rows, _ = _run(tmp_path, "honest", "toy_space", "auto", "", seeds=2)
    assert len(rows) == 2 and all(r["server"] == rows[0]["server"] for r in rows)
    assert "not warmed" not in rows[0]["server"] and "thread" not in rows[0]["server"]


def test_a_threaded_fork_server_is_refused_unless_confinement_is_off(monkeypatch):
    monkeypatch.setattr(fork_check, "THREADS", ["pool-1", "pool-2"])
    why = fork_check.refusal("auto")
    assert why.startswith("the fork server had 2 thread(s) besides its own once it imported the "
                          "plug-ins (pool-1, pool-2)")
    assert ("they run unconfined and every server is a fork of it, so none may start: a plug-in "
            "module that starts a thread when it is imported (start it lazily), or set "
            "DPKIT_SERVER_CONFINE=off to run without confinement") in why
    assert fork_check.refusal("require") == why and fork_check.refusal("off") == ""
    monkeypatch.setattr(fork_check, "THREADS", [])
    assert fork_check.refusal("auto") == ""


def test_a_fork_server_with_threads_executes_itself_again_without_warming_once(monkeypatch):
    calls = []
    monkeypatch.setattr(fork_check, "other_threads", lambda: ["lurker", "pool"])
    monkeypatch.setattr(fork_check.os, "execve", lambda *args: calls.append(args))
    monkeypatch.setenv(warm.VARIABLE, '[{"name": "toy_space", "params": {}}]')
    monkeypatch.setattr(fork_check, "THREADS", [])
    fork_check.check()
    (executable, argv, environment), = calls
    assert executable == sys.executable and argv == sys.orig_argv
    assert warm.VARIABLE not in environment and environment[fork_check.UNWARMED] == "lurker, pool"
    monkeypatch.delenv(warm.VARIABLE)  # the second time (not warming), the threads are named
    fork_check.check()
    assert len(calls) == 1 and fork_check.THREADS == ["lurker", "pool"]
    monkeypatch.setattr(fork_check, "THREADS", [])


def test_the_note_names_the_threads_that_stopped_the_warming(monkeypatch):
    monkeypatch.delenv(fork_check.UNWARMED, raising=False)
    assert fork_check.note() == ""
    monkeypatch.setenv(fork_check.UNWARMED, "lurker, pool")
    assert fork_check.note() == " (models not warmed: the fork server had thread(s) besides its " \
                                "own: lurker, pool)"


def test_only_a_fork_server_checks_itself_when_it_imports_the_module(monkeypatch):
    assert not fork_check.in_fork_server()
    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-c", "from multiprocessing.forkserver "
                                           "import main; main(3, 4, [])"])
    assert fork_check.in_fork_server()
