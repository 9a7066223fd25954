"""Privacy budget beyond one cell: a spec's total, the cost of releasing its best cell, and a
persistent store that charges every run on a private dataset (see docs/accounting.md).

The names below load on first use: ``dpkit budget status`` reads the store without importing
dp-accounting unless a stored charge is an (ε, δ) event.
"""

from typing import TYPE_CHECKING

from dpkit.base.lazy import export_lazily

_HOMES = {
    "DatasetId": "dpkit.budget.fingerprint", "identify": "dpkit.budget.fingerprint",
    "best_of_random_runs": "dpkit.budget.selection", "draw_repetitions": "dpkit.budget.selection",
    "release_best_ledger": "dpkit.budget.selection", "repeat_and_select": "dpkit.budget.selection",
    "row_spends": "dpkit.budget.summary", "spec_privacy": "dpkit.budget.summary",
    "spec_privacy_text": "dpkit.budget.summary",
    "CellSpends": "dpkit.budget.total", "GroupTotal": "dpkit.budget.total",
    "compose_cells": "dpkit.budget.total",
}
__all__ = sorted(_HOMES)
__getattr__ = export_lazily(__name__, _HOMES, globals())

if TYPE_CHECKING:
    from dpkit.budget.fingerprint import DatasetId as DatasetId
    from dpkit.budget.fingerprint import identify as identify
    from dpkit.budget.selection import best_of_random_runs as best_of_random_runs
    from dpkit.budget.selection import draw_repetitions as draw_repetitions
    from dpkit.budget.selection import release_best_ledger as release_best_ledger
    from dpkit.budget.selection import repeat_and_select as repeat_and_select
    from dpkit.budget.summary import row_spends as row_spends
    from dpkit.budget.summary import spec_privacy as spec_privacy
    from dpkit.budget.summary import spec_privacy_text as spec_privacy_text
    from dpkit.budget.total import CellSpends as CellSpends
    from dpkit.budget.total import GroupTotal as GroupTotal
    from dpkit.budget.total import compose_cells as compose_cells
