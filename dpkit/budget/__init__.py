"""Privacy budget beyond one cell: a spec's total, the cost of releasing its best cell, and a
persistent store that charges every run on a private dataset (see docs/accounting.md)."""

from dpkit.budget.fingerprint import DatasetId, identify
from dpkit.budget.selection import (
    best_of_random_runs,
    draw_repetitions,
    release_best_ledger,
    repeat_and_select,
)
from dpkit.budget.summary import row_spends, spec_privacy, spec_privacy_text
from dpkit.budget.total import CellSpends, GroupTotal, compose_cells

__all__ = [
    "CellSpends",
    "DatasetId",
    "GroupTotal",
    "best_of_random_runs",
    "compose_cells",
    "draw_repetitions",
    "identify",
    "release_best_ledger",
    "repeat_and_select",
    "row_spends",
    "spec_privacy",
    "spec_privacy_text",
]
