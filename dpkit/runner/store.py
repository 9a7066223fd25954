"""Result store: ``results.jsonl`` appended with fsync, one line per finished cell."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dpkit.base.jsonutil import json_safe, restore_floats
from dpkit.base.results import CellResult


# every file ``dpkit run`` writes into its output folder (``--fresh`` removes these and no other)
WRITTEN_FILES = ("results.jsonl", "results.csv", "cells.csv", "ledger.json", "claims.json",
                 "spec.json", "reference.json", "failures.jsonl", "tradeoff.png")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


class ResultStore:
    """Finished cells of one output folder; the single writer of ``results.jsonl``."""

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / "results.jsonl"
        self.rows: dict[str, CellResult] = {}
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a crash: that cell simply runs again
                if isinstance(row, dict) and "key" in row:
                    result = CellResult.from_dict(restore_floats(row))
                    self.rows[result.key] = result

    def done(self, key: str) -> bool:
        """Whether the cell ``key`` already finished."""
        return key in self.rows

    def append(self, row: CellResult) -> None:
        """Append one finished cell and fsync, so a crash loses at most the cell in flight."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        line = json.dumps(json_safe(row.to_dict()), sort_keys=True, default=_json_default)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.rows[row.key] = row

    def clear(self) -> None:
        """Forget all results (``--fresh``): removes only the files a run writes."""
        for name in WRITTEN_FILES:
            (self.out_dir / name).unlink(missing_ok=True)
        self.rows.clear()

    def record_failure(self, key: str, method: str, error: str) -> None:
        """Note a failed cell in ``failures.jsonl`` (it is retried on the next run)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / "failures.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key, "method": method, "error": error}) + "\n")
