"""Local executor: runs cells one after another in this process."""

from __future__ import annotations

from typing import Callable, ClassVar, Iterable

from dpkit.accounting.ledger import guarding
from dpkit.contract.registry import Registry
from dpkit.runner.execute import execute_cell
from dpkit.runner.preload import preload_servers
from dpkit.runner.executor import (GuardFor, OnFailure, OnResult, Progress, RetryPolicy,
                                   describe_failure)
from dpkit.spec.cells import Cell


class LocalExecutor:
    """Runs each cell in-process with the given registry."""

    name: ClassVar[str] = "local"

    def __init__(self, registry: Registry, policy: RetryPolicy | None = None):
        self.policy = policy or RetryPolicy()
        self.registry = registry
        self.noise_secret: str | None = None  # the run's (set by run_spec)
        self.guard_for: GuardFor | None = None  # set by the runner: (cell, attempt) -> a guard
        self._prepared = False

    def prepare(self, cells: list[Cell]) -> None:
        """Have the fork server start on ``cells``' server modules and public models now, while
        the preflight checks load the first cells' data."""
        preload_servers(list(cells), self.registry)
        self._prepared = True

    def run(self, cells: Iterable[Cell], on_result: OnResult, on_failure: OnFailure,
            should_stop: Callable[[], bool], progress: Progress | None = None) -> None:
        """Run ``cells`` in order, reporting each; stop between cells when asked."""
        cells = list(cells)
        if not self._prepared:
            self.prepare(cells)
        for cell in cells:
            if should_stop():
                return
            failed = 0
            while True:
                guard = self.guard_for(cell, failed + 1) if self.guard_for else None
                try:
                    with guarding(guard):  # every attempt is charged as it spends
                        row = execute_cell(cell, registry=self.registry, progress=progress,
                                           noise_secret=self.noise_secret)
                except Exception as exc:
                    failed += 1
                    if self.policy.should_retry(exc, failed):
                        continue
                    on_failure(cell, describe_failure(exc))
                else:
                    on_result(cell, row)
                break
