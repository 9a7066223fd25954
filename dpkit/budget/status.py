"""What a dataset has spent: its names, the datasets sharing its records, its cap and history, every
run that read its records, and each notion's total (``dpkit budget status``; :func:`dataset_status`).
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting import Ledger
from dpkit.base.errors import AccountingError, BudgetStoreError
from dpkit.budget.caps import totals
from dpkit.budget.state import State
from dpkit.budget.store import BudgetStore
from dpkit.budget.total import describe_ledger, ledger_record, record_spends

DEFAULT_DELTA = 1e-5


def find_datasets(state: State, query: str | None, where: str = "") -> list[dict[str, Any]]:
    """Datasets reached under the name ``query`` (``files`` matches ``files:a.csv``) or
    whose fingerprint starts with it (all for None)."""
    rows = list(state.datasets.values())
    if query is None:
        return rows
    found = [d for d in rows if any(n == query or n.startswith(query + ":") for n in d["names"])
             or d["fingerprint"].startswith(query)
             or d["fingerprint"].partition(":")[2].startswith(query)]
    if not found:
        names = ", ".join(sorted({n for d in rows for n in d["names"]})) or "(none yet)"
        raise BudgetStoreError(f"no dataset {query!r} in the budget store {where}; it holds: {names}")
    return found


def _short(meta: dict[str, Any]) -> str:
    kind, _, digest = meta["fingerprint"].partition(":")
    return f"{meta['name']} [{kind}:{digest[:8]}]"


def dataset_status(state: State, dataset: dict[str, Any], delta: float | None = None,
                   accountant: str = "rdp") -> dict[str, Any]:
    """Overlaps, cap, runs and totals of one dataset row of :func:`find_datasets`."""
    fp = dataset["fingerprint"]
    cap = state.caps.get(fp)
    delta = delta or (cap.delta if cap and cap.delta else DEFAULT_DELTA)
    cells = state.cells_reading(fp)
    counted = [(c.relation, s) for _, _, c in cells for s in c.counted()]
    by_relation: dict[str, Ledger] = {}
    for relation, spend in counted:
        ledger = by_relation.setdefault(relation, Ledger(delta=delta, accountant=accountant,
                                                         neighboring=relation))
        record_spends(ledger, [spend])
    out: dict[str, Any] = {
        **{k: dataset[k] for k in ("fingerprint", "name", "names", "basis", "records", "created")},
        "delta": delta, "accountant": accountant,
        "overlaps": [{"name": _short(state.datasets[o]), "fingerprint": o, "shared": n,
                      "share_of_this": (n / dataset["records"]) if n > 0 and dataset["records"]
                      else None} for o, n in sorted(state.overlaps.get(fp, {}).items()) if n],
        "cap": None if cap is None else {**vars(cap), "governs": cap.governs()},
        "cap_history": [h for h in state.cap_history if h["id"] == fp],
        "composed": {rel: ledger_record(led) for rel, led in by_relation.items()},
        "in_words": {rel: describe_ledger(led) for rel, led in by_relation.items()}, "runs": []}
    if cap is not None:
        try:
            out["totals"] = totals(cap, counted)
        except Exception as exc:  # noqa: BLE001 - shown, the admission refuses the same way
            out["totals"], out["totals_note"] = None, str(exc)
    seen: dict[int, dict[str, Any]] = {}
    for run, _key, cell in cells:
        row = seen.setdefault(run.id, {"id": run.id, "spec": run.spec, "out_dir": run.out_dir,
                                       "state": run.state, "host": run.host, "pid": run.pid,
                                       "started": run.started, "cells": 0, "charged_cells": 0,
                                       "charges": 0, "open_reservations": 0})
        row["cells"] += 1
        row["charged_cells"] += bool(cell.charges)
        row["charges"] += len(cell.charges)
        row["open_reservations"] += len(cell.counted()) - len(cell.charges)
    out["runs"] = list(seen.values())
    return out


def status_text(status: dict[str, Any]) -> str:
    """One dataset's status in words and a table of the runs that read its records."""
    from tabulate import tabulate

    lines = [f"{_short(status)} — {status['basis']}"]
    if len(status["names"]) > 1:
        lines.append(f"reached under the names: {', '.join(status['names'])}")
    for o in status["overlaps"]:
        share = f" ({o['share_of_this']:.1%} of this one's records)" if o["share_of_this"] else ""
        shared = "shares its budget by name (schema-1 history)" if o["shared"] < 0 else \
            f"shares {o['shared']:,} records{share}"
        lines.append(f"overlaps {o['name']}: {shared}; a run on either is charged to both caps")
    cap = status["cap"]
    if cap is None:
        lines.append("no cap (recording only)")
    else:
        lines.append("cap: " + "; ".join(cap["governs"]))
        t = status.get("totals")
        if t is None:
            lines.append(f"  spends cannot be counted against it: {status.get('totals_note')}")
        for name, symbol, extra in (("epsilon", "ε", " (privacy filter)"),
                                    ("eta", "η per token", ""),
                                    ("anonymity_epsilon", "(k, ε) ε", "")):
            if t is not None and cap[name] is not None:
                left = max(cap[name] - t[name], 0.0) if math.isfinite(t[name]) else 0.0
                lines.append(f"  {symbol} spent{extra} = {t[name]:.6g} of {cap[name]:g} "
                             f"(remaining {left:.6g})")
    for h in status["cap_history"]:
        lines.append(f"  cap {h['act']} at {h['at']} by {h.get('by', '?')}"
                     + (f": {h['reason']}" if h.get("reason") else ""))
    for rel, words in status["in_words"].items():
        lines.append(f"composed over every run reading these records, {rel} neighbours (valid "
                     f"for runs fixed in advance; adaptive runs: the filter), "
                     f"{status['accountant'].upper()}:")
        lines += [f"  {line}" for line in words or ["nothing spent"]]
    rows = [(r["id"], r["spec"], r["state"], r["started"], f"{r['charged_cells']}/{r['cells']}",
             r["charges"], r["open_reservations"], r["out_dir"]) for r in status["runs"]]
    lines.append(tabulate(rows, headers=["run", "spec", "state", "started", "cells charged",
                                         "charges", "held", "output"]) if rows else "(no runs)")
    return "\n".join(lines)


def store_status(store: BudgetStore, query: str | None, delta: float | None = None,
                 accountant: str = "rdp") -> list[dict[str, Any]]:
    """:func:`dataset_status` of every matching dataset, after verifying the whole history."""
    state = store.state(deep=True)
    try:
        return [dataset_status(state, d, delta, accountant)
                for d in find_datasets(state, query, store.where)]
    except AccountingError as exc:
        raise BudgetStoreError(f"cannot compose the charges of {query or 'the store'}: {exc}") from None
