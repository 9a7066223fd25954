"""Local executor: runs cells one after another in this process."""

from __future__ import annotations

import traceback
from typing import Callable, Iterable

from dpkit.runner.cells import Cell
from dpkit.runner.execute import execute_cell

OnResult = Callable[[Cell, dict], None]
OnFailure = Callable[[Cell, str], None]


class LocalExecutor:
    """Runs each cell in-process; ``retries`` extra attempts for a cell that raises."""

    name = "local"

    def __init__(self, retries: int = 0):
        self.retries = retries

    def run(self, cells: Iterable[Cell], on_result: OnResult, on_failure: OnFailure,
            should_stop: Callable[[], bool], progress: Callable[[str], None] | None = None) -> None:
        """Run ``cells`` in order, reporting each; stop between cells when asked."""
        from dpkit.errors import BudgetExceededError

        for cell in cells:
            if should_stop():
                return
            for attempt in range(self.retries + 1):
                try:
                    row = execute_cell(cell, progress=progress)
                except KeyboardInterrupt:
                    raise
                except BudgetExceededError as exc:  # deterministic: retrying cannot help
                    on_failure(cell, f"BudgetExceededError: {exc}")
                    break
                except Exception as exc:
                    if attempt < self.retries:
                        continue
                    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                    on_failure(cell, detail)
                else:
                    on_result(cell, row)
                    break
