"""The runner: runs a checked spec's pending cells on an executor and writes results and reports.

Depends on :mod:`dpkit.spec` (never the other way round). This module only re-exports, lazily:
``dpkit run`` imports :mod:`dpkit.runner.lock` to lock its output folder before anything heavy
(the plug-ins, torch, the spec machinery) is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpkit.runner.executor import Executor, RetryPolicy
    from dpkit.runner.run import RunOutcome, make_executor, run_spec
    from dpkit.spec.cells import Cell, expand

_EXPORTS = {"Executor": "dpkit.runner.executor", "RetryPolicy": "dpkit.runner.executor",
            "RunOutcome": "dpkit.runner.run", "make_executor": "dpkit.runner.run",
            "run_spec": "dpkit.runner.run", "Cell": "dpkit.spec.cells", "expand": "dpkit.spec.cells"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Cell", "Executor", "RetryPolicy", "RunOutcome", "expand", "make_executor", "run_spec"]
