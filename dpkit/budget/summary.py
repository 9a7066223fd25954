"""A spec's privacy, next to its per-cell figures: the total of releasing every cell, and of
releasing only the best one (the spec's ``selection``). What the table, ``ledger.json``,
``claims.json`` and ``dpkit budget spec`` show."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpkit.base.results import as_results
from dpkit.budget.fingerprint import DatasetId, DatasetIds

if TYPE_CHECKING:
    from dpkit.base.results import CellResult
    from dpkit.contract.registry import Registry
from dpkit.budget.selection import release_best_ledger
from dpkit.budget.total import (
    CellSpends,
    GroupTotal,
    compose_cells,
    describe_ledger,
    ledger_of,
    ledger_record,
)

FIXED_GRID = ("dpkit runs a fixed grid, which Papernot & Steinke's bound does not cover (it needs "
              "a random number of runs): the best cell is charged as every candidate composed")


def ref_key(data: Mapping[str, Any]) -> str:
    """A data ref as one string (name and params), the key of :func:`recorded_datasets`."""
    return json.dumps([data.get("name"), data.get("params") or {}], sort_keys=True, default=str)


def recorded_datasets(spec: Any, rows: Iterable[CellResult], registry: Registry) -> dict:
    """The identity of each data ref of ``rows`` (``ref_key -> {name, fingerprint, basis}``), for
    the run folder: a later ``dpkit report`` composes by it without loading a dataset."""
    of, default = dataset_ids(registry), spec.data.model_dump(mode="json")
    out = {}
    for r in rows:
        data = r.data or default
        ident = of(data)
        out[ref_key(data)] = {"name": ident.name, "fingerprint": ident.fingerprint,
                              "basis": ident.basis}
    return out


def dataset_ids(registry: Registry | None = None, recorded: Mapping[str, Any] | None = None) -> Any:
    """A ``data ref -> DatasetId`` function: the identity the run recorded (``recorded``, from
    :func:`recorded_datasets`), else fingerprinted with ``registry``; a dataset that cannot be
    built is keyed by its name."""
    ids = None
    if registry is not None:
        ids = DatasetIds(registry)

    def of(data: Mapping[str, Any]) -> DatasetId:
        known = (recorded or {}).get(ref_key(data))
        if known:
            return DatasetId(known["name"], known["fingerprint"], known["basis"])
        if ids is not None:
            try:
                return ids(dict(data))
            except Exception as exc:  # noqa: BLE001 - a report must render without the plug-in
                reason = f"{type(exc).__name__}: {exc}"
        else:
            reason = "the run folder records no identity for it"
        key = json.dumps(data.get("name"), default=str)
        return DatasetId(str(data.get("name")), f"name:{key}", f"not fingerprinted ({reason})")
    return of


def row_spends(rows: Iterable[CellResult], spec: Any, registry: Registry | None = None,
               recorded: Mapping[str, Any] | None = None) -> list[CellSpends]:
    """:class:`CellSpends` of finished rows (``data`` from the row, else the spec's)."""
    of = dataset_ids(registry, recorded)
    default = spec.data.model_dump(mode="json")
    return [CellSpends(r.key, r.method, of(r.data or default),
                       r.ledger.get("neighboring", "add_remove"),
                       list(r.ledger.get("spends", []))) for r in rows]


def _best_point(rows: list[CellResult], keys: list[str], selection: Any) -> dict | None:
    """The sweep point whose mean ``selection.metric`` over seeds is best (None if unmeasured)."""
    scores: dict[str, list[float]] = {}
    points: dict[str, Any] = {}
    for r in rows:
        value = r.metrics.get(selection.metric)
        if r.key in keys and isinstance(value, (int, float)):
            name = json.dumps(r.point, sort_keys=True, default=str)
            scores.setdefault(name, []).append(float(value))
            points[name] = r.point
    if not scores:
        return None
    pick = max if selection.direction == "max" else min
    best = pick(scores, key=lambda name: sum(scores[name]) / len(scores[name]))
    return {"point": points[best], selection.metric: sum(scores[best]) / len(scores[best])}


def _selection_record(group: GroupTotal, selection: Any, rows: list[CellResult]) -> dict:
    out: dict[str, Any] = {"data": selection.data}
    if selection.data == "none":
        out["note"] = "no selection: every cell's outputs are released (the total above)"
        return out
    out.update(metric=selection.metric, direction=selection.direction, note=FIXED_GRID)
    per_method = {}
    for method, members in group.methods().items():
        candidates = ledger_of(members, group.ledger.delta_target, group.ledger.accountant,
                               group.neighboring)
        chosen = release_best_ledger(candidates, selection.data, selection.metric,
                                     selection.score_in_ledger)
        assert chosen is not None  # data != "none"
        per_method[method] = {"candidates": len(members),
                              "best": _best_point(rows, [c.key for c in members], selection),
                              "release_best": ledger_record(chosen),
                              "in_words": describe_ledger(chosen)}
    out["methods"] = per_method
    return out


def spec_privacy(spec: Any, cells: list[CellSpends],
                 rows: Iterable[CellResult] = ()) -> dict:
    """JSON-ready: per (dataset, relation) the total of releasing every cell and the selection's."""
    groups = compose_cells(cells, spec.privacy.delta, spec.privacy.accountant)
    return {"composed_with": "dp-accounting", "groups": [
        {"dataset": g.dataset.name, "fingerprint": g.dataset.fingerprint,
         "fingerprint_of": g.dataset.basis, "neighboring": g.neighboring, "cells": len(g.members),
         "release_every_cell": ledger_record(g.ledger), "in_words": describe_ledger(g.ledger),
         "selection": _selection_record(g, spec.selection, list(rows))} for g in groups]}


def spec_privacy_text(record: Mapping[str, Any]) -> str:
    """The record of :func:`spec_privacy` in words, a few lines per dataset."""
    lines = []
    for g in record["groups"]:
        lines.append(f"Releasing every cell ({g['cells']} cells reading {g['dataset']} "
                     f"[{g['fingerprint'][:15]}], {g['neighboring']} neighbours), composed:")
        lines += [f"  {line}" for line in g["in_words"] or ["no release"]]
        sel = g["selection"]
        if sel["data"] == "none":
            continue
        lines.append(f"Releasing only the best cell by {sel['metric']} ({sel['direction']}) chosen "
                     f"on {sel['data']} data — {sel['note']}:")
        for method, item in sel["methods"].items():
            best = item["best"]
            at = (", ".join(f"{k}={v}" for k, v in best["point"].items()) or "-") if best else "?"
            lines.append(f"  {method} (best at {at}, {item['candidates']} candidates): "
                         + "; ".join(item["in_words"]))
    return "\n".join(lines)


def rows_privacy(spec: Any, rows: Sequence[CellResult], registry: Registry | None = None,
                 recorded: Mapping[str, Any] | None = None) -> dict:
    """:func:`spec_privacy` of a run's finished rows, each dataset as the run recorded it
    (``recorded``), else fingerprinted with ``registry`` (None: keyed by name)."""
    rows = as_results(rows)
    return spec_privacy(spec, row_spends(rows, spec, registry, recorded), rows)


def plan_privacy(spec: Any, plans: list[dict[str, Any]], registry: Registry | None = None) -> dict:
    """:func:`spec_privacy` of ``dpkit budget spec``'s plans (each seed of a plan is one cell)."""
    of = dataset_ids(registry)
    default = spec.data.model_dump(mode="json")
    cells = [CellSpends(f"{p['method']} {json.dumps(p['point'], default=str)} seed {seed}",
                        p["method"], of(p.get("data") or default),
                        p.get("neighboring", "add_remove"),
                        [{k: s[k] for k in ("label", "count", "guarantee")} for s in p["spends"]])
             for p in plans for seed in p.get("seeds", [0])]
    return spec_privacy(spec, cells)
