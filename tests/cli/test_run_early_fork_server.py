"""``dpkit run`` starts its fork server before its own imports only where server processes will
be forked from it: a local run with ``DPKIT_SERVER=process``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.cli import run as run_cli


@pytest.mark.parametrize(("executor", "server", "started"), [
    ("local", "process", True),
    ("local", None, True),  # process is the default
    ("local", "inprocess", False),
    ("local", "ray", False),
    ("ray", "process", False),
    ("local", "nonsense", False),  # the runner names the wrong value
])
def test_the_fork_server_starts_early_only_for_local_server_processes(monkeypatch, executor,
                                                                      server, started):
    calls = []
    monkeypatch.setattr("dpkit.boundary.fork_server.start_early",
                        lambda modules, environment: calls.append((modules, environment)))
    if server is None:
        monkeypatch.delenv("DPKIT_SERVER", raising=False)
    else:
        monkeypatch.setenv("DPKIT_SERVER", server)
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "tasks")
    run_cli._start_fork_server_early(executor, "specs/quick.yaml")
    assert bool(calls) is started
    if started:
        modules, environment = calls[0]
        assert modules == ["dpkit_tasks", "dpkit.runner.preload"]
        assert environment == {"DPKIT_FORK_SERVER_SPEC": str(Path("specs/quick.yaml").resolve())}
