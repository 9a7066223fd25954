"""CellResult: one typed record per cell, and results.jsonl keeps its format (same keys, one JSON
object a line); rows written before a key existed, or with keys from a newer format, still load."""

from __future__ import annotations

import json
import math

from dpkit.base.results import CellResult
from dpkit.runner.store import ResultStore

FORMAT_KEYS = {"key", "spec", "method", "kind", "component", "params", "point", "seed", "data",
               "metrics", "privacy", "ledger", "plan", "wire_bytes", "training_curves",
               "attacks_skipped", "device", "server", "elapsed_s"}
"""The 19 keys of a results.jsonl row: since plans and curves were added, and ``server`` (where
the cell's server ran, how confined) since each server has its own process."""


def result(**over) -> CellResult:
    fields = dict(key="k1", method="dχ-Laplace", seed=3, spec="quick", kind="mechanism",
                  component="laplace", params={"eta": 5.0}, point={"eta": 5.0},
                  data={"name": "d", "params": {}}, metrics={"accuracy": 0.7, "nan": math.nan},
                  privacy={"eta": 12.0, "epsilon": math.inf},
                  ledger={"spends": [], "no_guarantee_reasons": ["why"]}, plan="equal",
                  wire_bytes={"up": 10}, training_curves=[{"component": "c"}],
                  attacks_skipped=["nn"], device="cpu", elapsed_s=1.5)
    return CellResult(**{**fields, **over})


def test_the_row_written_has_exactly_the_format_keys(tmp_path):
    store = ResultStore(tmp_path)
    store.append(result())
    (line,) = (tmp_path / "results.jsonl").read_text().splitlines()
    assert set(json.loads(line)) == FORMAT_KEYS


def test_a_row_round_trips_through_the_file_with_infinities_and_nans(tmp_path):
    ResultStore(tmp_path).append(result())
    (back,) = ResultStore(tmp_path).rows.values()
    assert back.privacy["epsilon"] == math.inf and math.isnan(back.metrics["nan"])
    assert back.to_dict()["metrics"]["accuracy"] == 0.7
    assert back.no_guarantee_reasons == ["why"] and back.plan == "equal"


def test_an_older_row_without_later_keys_loads_with_defaults():
    old = {"key": "k", "method": "m", "seed": 0, "metrics": {"a": 1.0}, "privacy": {}}
    row = CellResult.from_dict(old)
    assert row.plan == "" and row.training_curves == [] and row.attacks_skipped == []
    assert row.to_dict()["metrics"] == {"a": 1.0}


def test_keys_of_another_format_are_kept_and_written_back(tmp_path):
    newer = {**result().to_dict(), "server_seconds": 4.2}
    row = CellResult.from_dict(newer)
    assert row.extra == {"server_seconds": 4.2}
    assert row.to_dict() == newer
    ResultStore(tmp_path).append(row)
    assert json.loads((tmp_path / "results.jsonl").read_text())["server_seconds"] == 4.2


def test_a_torn_last_line_costs_only_that_cell(tmp_path):
    store = ResultStore(tmp_path)
    store.append(result())
    with (tmp_path / "results.jsonl").open("a") as fh:
        fh.write('{"key": "k2", "method": ')
    assert list(ResultStore(tmp_path).rows) == ["k1"]
