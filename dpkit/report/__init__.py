"""Reports of a run, all derived from its rows: the terminal table, CSVs, ledger.json,
claims.json, spec.json and the privacy–utility plot (``outputs``, ``plot``)."""

from dpkit.report.outputs import (
    STATS,
    aggregate,
    metric_columns,
    render_table,
    uncovered_reasons,
    write_cells_csv,
    write_ledger,
    write_outputs,
    write_summary_csv,
)
from dpkit.report.table import PRIVACY_COLUMNS, PRIVACY_HEADERS, UNCOVERED_HEADER, short_reason

__all__ = ["PRIVACY_COLUMNS", "PRIVACY_HEADERS", "STATS", "UNCOVERED_HEADER", "aggregate",
           "metric_columns", "render_table", "short_reason", "uncovered_reasons",
           "write_cells_csv", "write_ledger", "write_outputs", "write_summary_csv"]
