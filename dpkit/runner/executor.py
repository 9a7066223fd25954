"""The executor boundary: what runs a list of cells, and the one retry policy every executor uses.

An executor (local, Ray, ...) runs cells and reports each as a result row or a failure; the
driver (:func:`dpkit.runner.run_spec`) stays the only writer of the output folder.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Protocol

from dpkit.base.results import CellResult
from dpkit.base.errors import BudgetExceededError
from dpkit.spec.cells import Cell

OnResult = Callable[[Cell, CellResult], None]
OnFailure = Callable[[Cell, str], None]
Progress = Callable[[str], None]
GuardFor = Callable[[Cell, int], Any]
"""(cell, attempt) -> the guard of that attempt's ledger (:mod:`dpkit.runner.budget`), or None."""

# deterministic refusals: running the cell again gives the same answer
NEVER_RETRIED: tuple[type[BaseException], ...] = (BudgetExceededError,)


class Executor(Protocol):
    """Runs cells, calling ``on_result`` or ``on_failure`` once per cell; stops when asked."""

    name: ClassVar[str]
    guard_for: GuardFor | None  # set by the runner; every attempt runs under its guard

    def prepare(self, cells: list[Cell]) -> None:
        """Start what running ``cells`` will need (called before the preflight checks, so that
        it overlaps them); the run may still be refused after it."""

    def run(self, cells: Iterable[Cell], on_result: OnResult, on_failure: OnFailure,
            should_stop: Callable[[], bool], progress: Progress | None = None) -> None:
        """Run ``cells``; check ``should_stop`` between cells and submit nothing new once set."""


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` extra attempts for a cell that raises, never for a refused spend."""

    retries: int = 0

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be ≥ 0, got {self.retries}")

    def should_retry(self, error: BaseException, failed_attempts: int) -> bool:
        """Whether to run the cell again after its ``failed_attempts``-th failure with ``error``."""
        if isinstance(error, NEVER_RETRIED):
            return False
        return failed_attempts <= self.retries


def describe_failure(error: BaseException) -> str:
    """One line for ``failures.jsonl``: the exception type and message."""
    return "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()[0]
