"""The budget guard in Ray workers: each cell's ledger charges the store from the worker, and a
spend past the cap is refused there, before the release."""

from __future__ import annotations

import os
import sys

import pytest

from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore

sys.path.insert(0, os.path.dirname(__file__))
from conftest import PLUGINS  # noqa: E402
from helpers import planned, run_path, spent, write_spec  # noqa: E402


@pytest.fixture(scope="module")
def ray_session():
    """One local 2-CPU Ray for the module; workers load the toy and budget test plug-ins."""
    ray = pytest.importorskip("ray")
    mp = pytest.MonkeyPatch()
    mp.setenv("DPKIT_LOAD_PLUGINS", "")
    mp.setenv("DPKIT_EXTRA_PLUGINS", PLUGINS)
    mp.setenv("PYTHONPATH", os.pathsep.join([os.path.dirname(__file__),
                                             os.environ.get("PYTHONPATH", "")]))
    from dpkit.runner.ray_executor import RayExecutor

    RayExecutor(num_cpus=2)._init()
    yield ray
    ray.shutdown()
    mp.undo()


def test_ray_workers_charge_the_store_and_refuse_past_the_cap(
        ray_session, budget_plugins, tmp_path, private_budget_store):
    store = BudgetStore(private_budget_store)
    plain = write_spec(tmp_path, "plain", etas="[0.01, 0.02]")
    store.set_cap(DatasetIds(budget_plugins)({"name": "toy_text", "params": {"n_docs": 16}}),
                  epsilon=3 * planned(plain), delta=1e-5)
    outcome = run_path(plain, executor="ray")
    assert outcome.ran == 2 and not outcome.failures
    (run,) = spent(store)["runs"]
    assert (run["charged_cells"], run["charges"]) == (2, 2)  # charged by the workers' guards
    more = write_spec(tmp_path, "more", defense="toy_sends_more")
    outcome = run_path(more, executor="ray")
    ((_, error),) = outcome.failures
    assert "BudgetExceededError" in error and "hidden_states" in error
    status = spent(store)
    assert status["totals"]["epsilon"] <= 3 * planned(plain)
    assert not status["composed"]["add_remove"].get("no_guarantee_reasons")
