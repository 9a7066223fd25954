"""The runner: runs a checked spec's pending cells on an executor and writes results and reports.

Depends on :mod:`dpkit.spec` (never the other way round). This module only re-exports.
"""

from dpkit.runner.executor import Executor, RetryPolicy
from dpkit.runner.run import RunOutcome, make_executor, run_spec
from dpkit.spec.cells import Cell, expand

__all__ = ["Cell", "Executor", "RetryPolicy", "RunOutcome", "expand", "make_executor", "run_spec"]
