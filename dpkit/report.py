"""Reports of a run: terminal table (tabulate), results.csv, ledger.json and a PNG plot."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from dpkit.metrics import mean_over_seeds

PRIVACY_COLUMNS = ("epsilon", "eta_per_token", "k_achieved", "anonymity_epsilon")
PRIVACY_HEADERS = {"epsilon": "ledger ε", "eta_per_token": "ledger η/token", "k_achieved": "achieved k",
                   "anonymity_epsilon": "anonymity ε"}


def aggregate(rows: list[dict]) -> list[dict]:
    """Rows averaged over seeds: one per (method, sweep point), metrics as means."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["method"], json.dumps(row["point"], sort_keys=True, default=str))].append(row)
    out = []
    for (method, _), members in groups.items():
        metrics = defaultdict(list)
        for m in members:
            for k, v in {**m["metrics"], **_privacy_numbers(m)}.items():
                metrics[k].append(v)
        out.append({"method": method, "point": members[0]["point"], "seeds": len(members),
                    "values": {k: mean_over_seeds(v) for k, v in metrics.items()}})
    return out


def _privacy_numbers(row: dict) -> dict[str, float]:
    return {k: float(v) for k, v in row.get("privacy", {}).items()
            if isinstance(v, (int, float)) and k in PRIVACY_COLUMNS}


def metric_columns(rows: list[dict], report) -> list[str]:
    """Metric names in display order: the report's utility and privacy first."""
    names = sorted({k for r in rows for k in r["metrics"]})
    first = [m for m in (report.utility, report.privacy) if m and m in names]
    return first + [n for n in names if n not in first]


def render_table(spec, rows: list[dict]) -> str:
    """The results table printed at the end of a run."""
    if not rows:
        return "(no finished cells)"
    agg = aggregate(rows)
    sweep_keys = sorted({k for r in agg for k in r["point"]})
    metrics = metric_columns(rows, spec.report)
    privacy = [c for c in PRIVACY_COLUMNS if any(c in r["values"] for r in agg)]
    headers = ["method", *sweep_keys, *metrics, *(PRIVACY_HEADERS[c] for c in privacy)]
    body = [[r["method"], *[r["point"].get(k, "") for k in sweep_keys],
             *[_fmt(r["values"].get(m)) for m in metrics + privacy]] for r in agg]
    return tabulate(body, headers=headers, tablefmt="github")


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        return f"{value:.4g}"
    return str(value)


def write_csv(rows: list[dict], path: Path) -> None:
    """One line per finished cell with flattened point, metrics and privacy numbers."""
    points = sorted({k for r in rows for k in r["point"]})
    metrics = sorted({k for r in rows for k in r["metrics"]})
    privacy = sorted({k for r in rows for k, v in r.get("privacy", {}).items()
                      if isinstance(v, (int, float, str))})
    header = ["key", "method", "component", "seed", *points, *metrics,
              *[f"privacy.{p}" for p in privacy], "elapsed_s"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r in rows:
            writer.writerow([r["key"], r["method"], r["component"], r["seed"],
                             *[r["point"].get(p, "") for p in points],
                             *[r["metrics"].get(m, "") for m in metrics],
                             *[r.get("privacy", {}).get(p, "") for p in privacy], r["elapsed_s"]])


def write_ledger(rows: list[dict], path: Path) -> None:
    """Every cell's ledger, keyed by cell, with its method and sweep point."""
    from dpkit.jsonutil import json_safe

    doc = {r["key"]: {"method": r["method"], "point": r["point"], "seed": r["seed"],
                      "summary": r.get("privacy", {}), "ledger": r.get("ledger", {})}
           for r in rows}
    path.write_text(json.dumps(json_safe(doc), indent=2, sort_keys=True, default=str) + "\n",
                    encoding="utf-8")


def write_outputs(spec, cells, rows: list[dict], out: Path) -> None:
    """results.csv, ledger.json and the plot for the finished rows (relabelled from cells)."""
    if not rows:
        return
    labels = {c.key: c.method for c in cells}
    rows[:] = [{**r, "method": labels.get(r["key"], r["method"])} for r in rows]
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "results.csv")
    write_ledger(rows, out / "ledger.json")
    from dpkit.plot import plot_tradeoff

    plot_tradeoff(spec, aggregate(rows), metric_columns(rows, spec.report), out / "tradeoff.png")
