"""Ray executor: each cell a Ray task; the driver stays the only writer of results.jsonl.

At most as many cells are in flight as the cluster has room for, so a stop request (Ctrl-C,
SIGTERM) waits only for cells already running. A cell that raises follows the shared
:class:`~dpkit.runner.executor.RetryPolicy` (a refused spend is never retried); a worker that
dies is retried by Ray itself (``max_retries``) and then reported.
"""

from __future__ import annotations

import os
from typing import Callable, ClassVar, Iterable

from dpkit.base.errors import DpkitError
from dpkit.base.results import CellResult
from dpkit.runner.executor import (GuardFor, OnFailure, OnResult, Progress, RetryPolicy,
                                   describe_failure)
from dpkit.spec.cells import Cell

_ENV_VARS = ("DPKIT_LOAD_PLUGINS", "DPKIT_DISABLED_PLUGINS", "DPKIT_EXTRA_PLUGINS", "DPKIT_CACHE",
             "HF_HUB_OFFLINE", "DPKIT_BUDGET_STORE")


def _import_ray():
    try:
        import ray
    except ImportError:
        raise DpkitError("--executor ray needs Ray, which is not installed; install it with "
                         "pip install 'dpkit[ray]' (or pip install -e \".[ray]\" in a checkout)"
                         ) from None
    return ray


def _run_cell(raw: dict, noise_secret: str | None = None, guard=None) -> CellResult:
    """Worker side: rebuild the cell and run it with the worker's own plug-in registry (a worker
    is a process of its own: its plug-in system is its entry point, like the command line's),
    its ledger guarded by ``guard`` (the budget store's charge, made from the worker); the cell's
    server is a Ray actor of its own."""
    from dpkit.accounting.ledger import guarding
    from dpkit.contract.plugins import get_registry
    from dpkit.runner.execute import execute_cell

    with guarding(guard):
        return execute_cell(Cell.from_dict(raw), get_registry(), noise_secret=noise_secret,
                            server="ray")


class RayExecutor:
    """Fans cells out to a Ray cluster (a local one when no address is given)."""

    name: ClassVar[str] = "ray"

    def __init__(self, policy: RetryPolicy | None = None, address: str | None = None,
                 num_cpus: int | None = None):
        self.ray = _import_ray()
        self.policy = policy or RetryPolicy()
        self.noise_secret: str | None = None  # the run's (set by run_spec)
        self.address, self.num_cpus = address, num_cpus
        self.guard_for: GuardFor | None = None  # set by the runner: (cell, attempt) -> a guard

    def prepare(self, cells: list[Cell]) -> None:
        """Nothing to start before the preflight checks: Ray starts when the cells run."""

    def _init(self) -> None:
        env = {k: os.environ[k] for k in _ENV_VARS if k in os.environ}
        if self.ray.is_initialized():
            return
        kwargs = dict(runtime_env={"env_vars": env}, include_dashboard=False,
                      log_to_driver=False, configure_logging=False)
        if self.address:
            self.ray.init(address=self.address, **kwargs)
        else:
            self.ray.init(num_cpus=self.num_cpus or os.cpu_count(), **kwargs)

    def run(self, cells: Iterable[Cell], on_result: OnResult, on_failure: OnFailure,
            should_stop: Callable[[], bool], progress: Progress | None = None) -> None:
        """Run ``cells`` on Ray, reporting each result to the driver as it arrives."""
        ray = self.ray
        self._init()
        remote = ray.remote(_run_cell)
        queue = list(cells)
        attempts: dict[str, int] = {}
        running: dict = {}

        def submit(cell: Cell) -> None:
            res = cell.resources or {}
            guard = self.guard_for(cell, attempts.get(cell.key, 0) + 1) if self.guard_for else None
            task = remote.options(num_cpus=res.get("cpus", 1), num_gpus=res.get("gpus", 0),
                                  max_retries=max(self.policy.retries, 1))
            ref = task.remote(cell.to_dict(), self.noise_secret, guard)
            running[ref] = cell

        window = max(1, int(ray.cluster_resources().get("CPU", 1)))
        while queue or running:
            while queue and len(running) < window and not should_stop():
                submit(queue.pop(0))
            if not running:
                break
            done, _ = ray.wait(list(running), num_returns=1)
            cell = running.pop(done[0])
            try:
                row = ray.get(done[0])
            except Exception as exc:
                cause = getattr(exc, "cause", None) or exc  # RayTaskError wraps the cell's error
                attempts[cell.key] = attempts.get(cell.key, 0) + 1
                if self.policy.should_retry(cause, attempts[cell.key]) and not should_stop():
                    queue.insert(0, cell)
                    continue
                on_failure(cell, describe_failure(cause))
            else:
                on_result(cell, row)
            if progress:
                progress(f"{len(running)} running, {len(queue)} queued on Ray")
