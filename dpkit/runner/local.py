"""Local executor: runs cells one after another in this process."""

from __future__ import annotations

from typing import Callable, ClassVar, Iterable

from dpkit.accounting.ledger import guarding
from dpkit.contract.registry import Registry
from dpkit.runner.execute import execute_cell
from dpkit.runner.executor import (GuardFor, OnFailure, OnResult, Progress, RetryPolicy,
                                   describe_failure)
from dpkit.spec.cells import Cell


def preload_servers(cells: list[Cell], registry: Registry) -> None:
    """Have the fork server import every module the cells' server processes need, and load
    their public CPU models, once (:mod:`dpkit.boundary.warm`)."""
    import json
    import os

    from dpkit.boundary import warm
    from dpkit.boundary.channel import channel_kind, preload, start_fork_server
    from dpkit.boundary.session import server_modules
    from dpkit.runner.cell import defense_for

    refs = warm.warm_references(cells)
    if refs:
        os.environ[warm.VARIABLE] = json.dumps(refs)
        os.environ[warm.VARIABLE + "_PLUGINS"] = json.dumps(dict(getattr(registry, "modules", {})))
        preload(["dpkit.boundary.warm"])

    preload(sorted(set(getattr(registry, "modules", {}).values())))
    seen: set[tuple[str, str]] = set()
    for cell in cells:
        if (cell.kind, cell.component) not in seen:
            seen.add((cell.kind, cell.component))
            try:
                preload(server_modules(defense_for(cell, registry)))
            except Exception:  # noqa: BLE001 - the cell itself will report why it cannot run
                continue
    if channel_kind() == "process" and cells:
        start_fork_server()


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
