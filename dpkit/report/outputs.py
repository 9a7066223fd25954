"""Reports of a run: terminal table (tabulate), results.csv (mean, sd, 95 % CI per metric),
cells.csv, ledger.json, claims.json, spec.json and a PNG plot; all derived from the rows alone,
so ``dpkit report`` re-renders them without running a cell."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dpkit.base.results import CellResult, as_results
from dpkit.budget.summary import rows_privacy, spec_privacy_text
from dpkit.evidence import evaluate_all, format_verdicts, summarize, write_claims
from dpkit.report.reference import FILE as REFERENCE_FILE
from dpkit.report.reference import (reference_agg, reference_note, reference_rows, space_scales,
                                    write_reference)
from dpkit.report.table import (
    BLANK,
    PRIVACY_COLUMNS,
    blank_note,
    build_columns,
    column_legend,
    fmt_stat,
    fold_columns,
    guarantee_words,
    headline_metrics,
    render_rows,
    with_arrows,
    wrap,
)

if TYPE_CHECKING:
    from dpkit.contract.registry import Registry

STATS = ("mean", "sd", "ci_low", "ci_high", "n")


def aggregate(rows: list[CellResult]) -> list[dict]:
    """Rows summarized over seeds: one per (method, sweep point), with ``values`` (means) and
    ``stats`` (:class:`dpkit.evidence.Summary`: mean, sd, Student-t 95 % interval, n)."""
    rows = as_results(rows)
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for row in rows:
        groups[(row.method, json.dumps(row.point, sort_keys=True, default=str))].append(row)
    out = []
    for (method, _), members in groups.items():
        metrics = defaultdict(list)
        for m in members:
            for k, v in {**m.metrics, **_privacy_numbers(m)}.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    metrics[k].append(float(v))
        stats = {k: summarize(v) for k, v in metrics.items()}
        out.append({"method": method, "point": members[0].point, "seeds": len(members),
                    "values": {k: s.mean for k, s in stats.items()}, "stats": stats,
                    "uncovered": sorted({r for m in members for r in uncovered_reasons(m)})})
    return out


def uncovered_reasons(row: CellResult) -> list[str]:
    """The reasons of a cell's ε = ∞ entries (what crossed the wire without a guarantee)."""
    return row.no_guarantee_reasons


def _uncovered_legend(agg: list[dict]) -> str:
    reasons = sorted({r for row in agg for r in row["uncovered"]})
    return "\n".join(["Not covered by any guarantee (each makes the cell's ε = ∞):",
                      *[f"  - {r}" for r in reasons]]) if reasons else ""


def _privacy_numbers(row: CellResult) -> dict[str, float]:
    return {k: float(v) for k, v in row.privacy.items()
            if isinstance(v, (int, float)) and k in PRIVACY_COLUMNS}


def metric_columns(rows: list[CellResult], report) -> list[str]:
    """Metric names in display order: the report's utility and privacy first."""
    names = sorted({k for r in rows for k in r.metrics})
    first = [m for m in (report.utility, report.privacy) if m and m in names]
    return first + [n for n in names if n not in first]


def render_table(spec, rows: list[CellResult], wide: bool = False,
                 registry: Registry | None = None, reference: dict | None = None,
                 fingerprint: bool = True) -> str:
    """The results table (mean ± 95 % half-width over seeds) with its reference rows (no noise,
    chance), which way each column is better, the guarantees in words, then the claims' verdicts;
    compact (headline metrics and guarantees) unless ``wide``. ``reference`` is the run's
    ``reference.json`` (:mod:`dpkit.report.reference`); without it only dpkit's cache is read.
    The spec's privacy composes each dataset as ``reference`` records it, else as ``registry``
    fingerprints it when ``fingerprint`` (loading it), else by its name."""
    rows = as_results(rows)
    if not rows:
        return "(no finished cells yet)"
    agg = aggregate(rows)
    metrics = metric_columns(rows, spec.report)
    headers, body = build_columns(agg, metrics, spec.report, wide)
    stay = {*headline_metrics(metrics, spec.report), "guarantee"}
    headers, body, notes = fold_columns(headers, body, stay)
    spread = any(s.n > 1 for r in agg for s in r["stats"].values())
    if spread:
        notes.insert(0, "± is the half-width of the 95 % Student-t interval over seeds.")
    notes += [line for line in (blank_note(agg, rows, body), _uncovered_legend(agg)) if line]
    refs = reference_rows(rows, [h for h in headers if h in metrics], reference)
    body += [[label if h == "method" else _cell(values.get(h)) for h in headers]
             for label, values in refs]
    notes += [line for line in (reference_note(refs, reference), column_legend(headers, metrics))
              if line]
    notes += guarantee_words(rows, spec, space_scales(rows, reference))
    if not wide:
        notes.append("More columns: --wide (every metric); results.csv has each metric's mean, sd, "
                     "95 % interval and n.")
    text = render_rows(with_arrows(headers, metrics), body) + "\n" + "\n".join(
        wrap(note) for note in notes)
    recorded = (reference or {}).get("datasets")
    ids = registry if fingerprint else None
    text += f"\n\n{spec_privacy_text(rows_privacy(spec, rows, ids, recorded))}"
    verdicts = format_verdicts(evaluate_all(spec, rows))
    return text + (f"\n\n{verdicts}" if verdicts else "")


def _cell(value) -> str:
    """A reference row's entry: a summary over seeds, a number, or blank."""
    if value is None:
        return BLANK
    return fmt_stat(value) if hasattr(value, "n") else f"{value:.4g}"


def write_summary_csv(rows: list[CellResult], path: Path) -> None:
    """results.csv: one line per (method, sweep point), each metric as mean, sd, ci_low,
    ci_high and n (95 % Student-t interval over seeds)."""
    agg = aggregate(rows)
    points = sorted({k for r in agg for k in r["point"]})
    names = sorted({k for r in agg for k in r["stats"]})
    header = ["method", *points, "seeds", *[f"{m}.{s}" for m in names for s in STATS],
              "not_covered"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r in agg:
            cells = []
            for m in names:
                stat = r["stats"].get(m)
                cells += [getattr(stat, s) for s in STATS] if stat else [""] * len(STATS)
            writer.writerow([r["method"], *[r["point"].get(p, "") for p in points], r["seeds"],
                             *cells, "; ".join(r["uncovered"])])


def write_cells_csv(rows: list[CellResult], path: Path) -> None:
    """cells.csv: one line per finished cell with flattened point, metrics and privacy numbers."""
    points = sorted({k for r in rows for k in r.point})
    metrics = sorted({k for r in rows for k in r.metrics})
    privacy = sorted({k for r in rows for k, v in r.privacy.items()
                      if isinstance(v, (int, float, str))})
    header = ["key", "method", "component", "seed", *points, *metrics,
              *[f"privacy.{p}" for p in privacy], "elapsed_s"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r in rows:
            writer.writerow([r.key, r.method, r.component, r.seed,
                             *[r.point.get(p, "") for p in points],
                             *[r.metrics.get(m, "") for m in metrics],
                             *[r.privacy.get(p, "") for p in privacy], r.elapsed_s])


def write_ledger(rows: list[CellResult], path: Path, total: dict | None = None) -> None:
    """Every cell's ledger under ``cells`` (keyed by cell, with its method and sweep point), and
    the spec's composed ``total`` (:func:`dpkit.budget.spec_privacy`)."""
    from dpkit.base.jsonutil import json_safe

    cells = {r.key: {"method": r.method, "point": r.point, "seed": r.seed,
                     "summary": r.privacy, "ledger": r.ledger}
             for r in rows}
    doc = {"format": "dpkit-run-ledger/2", "cells": cells, "total": total}
    path.write_text(json.dumps(json_safe(doc), indent=2, sort_keys=True, default=str) + "\n",
                    encoding="utf-8")


def write_outputs(spec, cells, rows: list[CellResult], out: Path,
                  registry: Registry | None = None, reference: dict | None = None,
                  fingerprint: bool = True) -> None:
    """results.csv (summary), cells.csv, ledger.json, claims.json, spec.json and the plot for the
    finished rows (relabelled from ``cells`` when given); ``registry`` fingerprints the datasets
    (None: each is keyed by its name); ``reference.json`` (and the plot's reference levels) when
    ``reference`` is given: the run measures it, ``dpkit report`` passes the folder's own."""
    rows[:] = as_results(rows)
    if not rows:
        return
    labels = {c.key: c.method for c in cells}
    rows[:] = [replace(r, method=labels.get(r.key, r.method)) for r in rows]
    out.mkdir(parents=True, exist_ok=True)
    if reference is not None:
        write_reference(reference, out / REFERENCE_FILE)
    write_summary_csv(rows, out / "results.csv")
    write_cells_csv(rows, out / "cells.csv")
    total = rows_privacy(spec, rows, registry if fingerprint else None,
                         (reference or {}).get("datasets"))
    write_ledger(rows, out / "ledger.json", total)
    from dpkit.base.jsonutil import json_safe  # η = ∞ in params stays "inf", not null

    (out / "spec.json").write_text(json.dumps(json_safe(spec.model_dump()), indent=2) + "\n",
                                   encoding="utf-8")
    verdicts = evaluate_all(spec, rows)
    if verdicts:
        write_claims(verdicts, out / "claims.json")
        claims = json.loads((out / "claims.json").read_text(encoding="utf-8"))
        (out / "claims.json").write_text(json.dumps({**claims, "privacy_total": total}, indent=2,
                                                    default=str) + "\n", encoding="utf-8")
    else:
        (out / "claims.json").unlink(missing_ok=True)
    from dpkit.report.plot import plot_tradeoff

    metrics = metric_columns(rows, spec.report)
    plot_tradeoff(spec, aggregate(rows) + reference_agg(rows, metrics, reference), metrics,
                  out / "tradeoff.png", verdicts)
