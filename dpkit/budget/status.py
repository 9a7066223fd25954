"""What a dataset has spent: every run charged, its spends, the composed ε(δ) and δ(ε), and the
filter's ε against the cap (``dpkit budget status``; :func:`dataset_status` in Python)."""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting import Ledger, guarantee_from_dict
from dpkit.budget.filter import filter_epsilon
from dpkit.budget.store import BudgetStore
from dpkit.budget.total import describe_ledger, ledger_record, record_spends
from dpkit.base.errors import AccountingError, BudgetStoreError

DEFAULT_DELTA = 1e-5


def find_datasets(store: BudgetStore, query: str | None) -> list[dict[str, Any]]:
    """Datasets whose name equals ``query`` or whose fingerprint starts with it (all for None)."""
    rows = store.datasets()
    if query is None:
        return rows
    found = [d for d in rows if d["name"] == query or d["fingerprint"].startswith(query)
             or d["fingerprint"].removeprefix("sha256:").startswith(query)]
    if not found:
        names = ", ".join(sorted({d["name"] for d in rows})) or "(none yet)"
        raise BudgetStoreError(f"no dataset {query!r} in the budget store {store.where}; it holds: "
                               f"{names}")
    return found


def _ledger(charges: list[dict[str, Any]], delta: float, accountant: str, relation: str) -> Ledger:
    ledger = Ledger(delta=delta, accountant=accountant, neighboring=relation)
    for charge in charges:
        record_spends(ledger, charge["spends"], prefix=f"{charge['cell'][:8]} ")
    return ledger


def dataset_status(store: BudgetStore, dataset: dict[str, Any], delta: float | None = None,
                   epsilon: float | None = None, accountant: str = "rdp") -> dict[str, Any]:
    """Runs, charges and totals of one dataset row of :meth:`BudgetStore.datasets`."""
    relation = dataset["neighboring"]
    cap = (dataset["cap_epsilon"], dataset["cap_delta"]) if dataset["cap_epsilon"] else None
    delta = delta or (cap[1] if cap else DEFAULT_DELTA)
    runs = store.runs(dataset["fingerprint"], relation)
    charges = [c for r in runs for c in r["charges"]]
    total = _ledger(charges, delta, accountant, relation)
    eps = total.epsilon()
    at = epsilon if epsilon is not None else (cap[0] if cap else _round_up(eps))
    out: dict[str, Any] = {**dataset, "delta": delta, "accountant": accountant,
                           "composed": ledger_record(total), "in_words": describe_ledger(total),
                           "delta_at": {"epsilon": at, "delta": total.delta(at)} if at else None,
                           "runs": []}
    try:
        pairs = [(guarantee_from_dict(s["guarantee"]), int(s["count"]))
                 for c in charges for s in c["spends"]]
        out["filter_epsilon"] = filter_epsilon(pairs, cap[1] if cap else delta, relation)
    except AccountingError as exc:
        out["filter_epsilon"], out["filter_note"] = math.inf, str(exc)
    for r in runs:
        ledger = _ledger(r["charges"], delta, accountant, relation)
        states = [c["state"] for c in r["charges"]]
        out["runs"].append({**{k: r[k] for k in ("id", "spec", "out_dir", "state", "host", "pid",
                                                  "started", "updated")},
                            "spent_cells": states.count("spent"),
                            "reserved_cells": states.count("reserved"),
                            "charges": r["charges"], "in_words": describe_ledger(ledger)})
    return out


def _round_up(value: float) -> float | None:
    """A round ε just above ``value`` to ask δ(ε) at (None for 0 or ∞)."""
    if not value or not math.isfinite(value):
        return None
    step = 10 ** math.floor(math.log10(value))
    return math.ceil(value / step + 1e-12) * step


def status_text(status: dict[str, Any]) -> str:
    """One dataset's status in words and a table of its runs."""
    from tabulate import tabulate

    lines = [f"{status['name']} [{status['fingerprint'][:15]}] — {status['neighboring']} "
             f"neighbours; fingerprint of {status['basis']}"]
    if status["cap_epsilon"]:
        left = status["cap_epsilon"] - status["filter_epsilon"]
        lines.append(f"cap: ε = {status['cap_epsilon']:g} at δ = {status['cap_delta']:g}; privacy "
                     f"filter ε = {status['filter_epsilon']:.6g} (remaining {max(left, 0):.6g})")
    lines.append(f"composed over every run (valid for runs fixed in advance; adaptive runs: the "
                 f"filter), {status['accountant'].upper()}:")
    lines += [f"  {line}" for line in status["in_words"] or ["nothing spent"]]
    if status["delta_at"]:
        lines.append(f"  δ(ε = {status['delta_at']['epsilon']:g}) = {status['delta_at']['delta']:.3g}")
    rows = [(r["id"], r["spec"], r["state"], r["started"], f"{r['spent_cells']}/{r['reserved_cells']}",
             "; ".join(r["in_words"]) or "-", r["out_dir"]) for r in status["runs"]]
    lines.append(tabulate(rows, headers=["run", "spec", "state", "started", "cells spent/reserved",
                                         "spends composed", "output"]) if rows else "(no runs)")
    return "\n".join(lines)
