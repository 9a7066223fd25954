"""One retry policy for every executor; a refused spend is never retried; registry honoured."""

from __future__ import annotations


import pytest

from dpkit.base.errors import BudgetExceededError
from dpkit.contract.registry import Registry
from dpkit.runner import RetryPolicy, run_spec
from dpkit.runner.executor import NEVER_RETRIED
from dpkit.runner.local import LocalExecutor
from dpkit.spec import Cell, load_spec


def test_policy_retries_errors_but_never_a_refused_spend():
    policy = RetryPolicy(retries=2)
    assert policy.should_retry(RuntimeError("x"), 1) and policy.should_retry(RuntimeError("x"), 2)
    assert not policy.should_retry(RuntimeError("x"), 3)
    assert not policy.should_retry(BudgetExceededError("over"), 1)
    assert BudgetExceededError in NEVER_RETRIED
    with pytest.raises(ValueError, match="retries"):
        RetryPolicy(-1)


def fake_cell(key: str) -> Cell:
    return Cell("s", "m", "defense", "c", {}, {}, 0, {}, None, [], {}, "cpu", {}, key=key)


@pytest.mark.parametrize("error, calls", [(BudgetExceededError("over ceiling"), 1),
                                          (RuntimeError("flaky"), 3)])
def test_local_executor_follows_the_policy(monkeypatch, error, calls):
    seen = []

    def execute_cell(cell, registry, progress=None, **_):
        seen.append(cell.key)
        raise error

    monkeypatch.setattr("dpkit.runner.local.execute_cell", execute_cell)
    failures = []
    LocalExecutor(Registry(), RetryPolicy(2)).run([fake_cell("a")], lambda c, r: None,
                                                  lambda c, e: failures.append(e), lambda: False)
    assert len(seen) == calls and len(failures) == 1
    assert type(error).__name__ in failures[0]


class FakeRay:
    """Just enough of Ray for the executor loop: tasks run eagerly, errors come back wrapped."""

    class TaskError(Exception):
        def __init__(self, cause):
            super().__init__(str(cause))
            self.cause = cause

    def __init__(self, fn_error):
        self.fn_error, self.calls = fn_error, 0

    def is_initialized(self):
        return True

    def cluster_resources(self):
        return {"CPU": 2}

    def remote(self, fn):
        ray = self

        class Remote:
            def options(self, **_):
                return self

            def remote(self, raw, *_):
                ray.calls += 1
                return ("ref", ray.calls)

        return Remote()

    def wait(self, refs, num_returns=1):
        return refs[:1], refs[1:]

    def get(self, ref):
        raise FakeRay.TaskError(self.fn_error)


@pytest.mark.parametrize("error, calls", [(BudgetExceededError("over ceiling"), 1),
                                          (RuntimeError("flaky"), 3)])
def test_ray_executor_follows_the_same_policy(monkeypatch, error, calls):
    from dpkit.runner import ray_executor

    fake = FakeRay(error)
    monkeypatch.setattr(ray_executor, "_import_ray", lambda: fake)
    failures = []
    ray_executor.RayExecutor(RetryPolicy(2)).run(
        [fake_cell("a")], lambda c, r: None, lambda c, e: failures.append(e), lambda: False)
    assert fake.calls == calls and len(failures) == 1
    assert type(error).__name__ in failures[0]


def test_run_spec_uses_the_given_registry(toy_spec_text, monkeypatch):
    """The local executor runs with the registry passed to run_spec, not the process-wide one."""
    import dpkit.contract.plugins
    import dpkit.testing.toy
    from dpkit.contract.plugins import PluginSystem

    own = PluginSystem()
    own.add(dpkit.testing.toy, "toy")
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.delenv("DPKIT_EXTRA_PLUGINS", raising=False)
    dpkit.contract.plugins.reset()
    try:
        assert not dpkit.contract.plugins.get_registry().names("defense")
        path, _ = toy_spec_text
        outcome = run_spec(load_spec(path, registry=own.registry), registry=own.registry,
                           show_progress=False)
        assert outcome.ran == 3 and not outcome.failures
    finally:
        dpkit.contract.plugins.reset()




def test_the_executor_prepares_the_pending_cells_before_the_preflight_checks(toy_spec_text,
                                                                           monkeypatch, tmp_path):
    """The fork server starts while preflight loads the first cells' data, once per run."""
    events = []
    monkeypatch.setattr("dpkit.runner.local.preload_servers",
                        lambda cells, registry: events.append(("prepare", len(cells))))
    real = __import__("dpkit.runner.run", fromlist=["preflight"]).preflight
    monkeypatch.setattr("dpkit.runner.run.preflight",
                        lambda spec, cells, *a, **k: events.append(("preflight", len(cells)))
                        or real(spec, cells, *a, **k))
    import dpkit.testing.toy
    from dpkit.contract.plugins import PluginSystem

    system = PluginSystem()
    system.add(dpkit.testing.toy, "toy")
    path, _ = toy_spec_text
    outcome = run_spec(load_spec(path, registry=system.registry), tmp_path / "out",
                       registry=system.registry, show_progress=False)
    assert outcome.ran == 3
    assert events == [("prepare", 3), ("preflight", 3)]
