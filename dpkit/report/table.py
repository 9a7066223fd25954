"""The terminal table of a run: compact by default, every metric with ``--wide``.

The compact table holds the method, the swept values, the spec's headline metrics (``report:
{utility, privacy}``) and the privacy guarantee of each row; the guarantee is then said in words
with its unit. In either form a column equal to an earlier one in every row is shown once, a
column equal in every row becomes one line under the table, and blank cells are explained.
Everything else is in ``results.csv`` (mean, sd, 95 % interval and n of every metric).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from dpkit.report.labels import arrow, direction, metric_label

if TYPE_CHECKING:
    from dpkit.base.results import CellResult

PRIVACY_COLUMNS = ("epsilon", "eta_per_token", "eta_per_sequence", "k_achieved",
                   "anonymity_epsilon")
PRIVACY_HEADERS = {"epsilon": "ledger ε", "eta_per_token": "ledger η/token",
                   "eta_per_sequence": "ledger η/sequence", "k_achieved": "achieved k",
                   "anonymity_epsilon": "anonymity ε"}
UNCOVERED_HEADER = "ε = ∞ because"
BOOKKEEPING = ("converged", "curves_not_converged", "n_docs", "n_tokens", "train_loss_final")
"""Metrics that describe the run rather than the method: in ``--wide`` and the CSVs only."""
BLANK = "–"


def headline_metrics(metrics: list[str], report: Any) -> list[str]:
    """The spec's headline metrics (``report.utility``, ``report.privacy``), else the first two
    that are not bookkeeping."""
    named = [m for m in (report.utility, report.privacy) if m and m in metrics]
    return named or [m for m in metrics if m not in BOOKKEEPING][:2]


def build_columns(agg: list[dict], metrics: list[str], report: Any,
                  wide: bool) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells (before columns are folded): method, sweep, seeds, metrics,
    the privacy columns and, if any row has them, the reasons of ε = ∞."""
    sweep = sorted({k for r in agg for k in r["point"]})
    shown = metrics if wide else headline_metrics(metrics, report)
    privacy = [c for c in PRIVACY_COLUMNS if any(c in r["values"] for r in agg)]
    uncovered = any(r["uncovered"] for r in agg)
    headers = ["method", *sweep, "seeds", *shown,
               *((PRIVACY_HEADERS[c] for c in privacy) if wide else ["guarantee"] if privacy else []),
               *([UNCOVERED_HEADER] if uncovered else [])]
    body = []
    for r in agg:
        stats = [fmt_stat(r["stats"].get(m)) or BLANK for m in shown]
        if wide:
            stats += [fmt_stat(r["stats"].get(c)) or BLANK for c in privacy]
        elif privacy:
            stats.append(guarantee_cell(r["values"]))
        why = [", ".join(dict.fromkeys(short_reason(x) for x in r["uncovered"])) or BLANK]
        body.append([_label(r), *[_plain(r["point"].get(k)) for k in sweep], str(r["seeds"]),
                     *stats, *(why if uncovered else [])])
    return headers, body


def guarantee_cell(values: dict[str, float]) -> str:
    """A row's guarantees, short, with their units: ``η = 10/token``, ``ε = 1.2``, ``k ≥ 5``."""
    parts = []
    if "eta_per_token" in values:
        parts.append(f"η = {_fmt(values['eta_per_token'])}/token")
    if "eta_per_sequence" in values:
        parts.append(f"η = {_fmt(values['eta_per_sequence'])}/sequence")
    if "epsilon" in values:
        parts.append(f"ε = {_fmt(values['epsilon'])}")
    if "k_achieved" in values:
        anonymity = values.get("anonymity_epsilon")
        parts.append(f"k ≥ {_fmt(values['k_achieved'])}"
                     + (f" (ε = {_fmt(anonymity)})" if anonymity is not None else ""))
    return ", ".join(parts) or BLANK


def fold_columns(headers: list[str], body: list[list[str]], stay: Collection[str] = ()
                 ) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop a column equal to an earlier one in every row, and one with the same value in every
    row of a table of two or more rows (but for the method and the columns in ``stay``); returns
    what is left and the notes that say what was dropped."""
    keep, same, equal = [0], [], []
    for j in range(1, len(headers)):
        column = [row[j] for row in body]
        twin = next((headers[i] for i in keep if [row[i] for row in body] == column), None)
        if twin is not None:
            equal.append(f"{headers[j]} = {twin}")
        elif len(body) > 1 and len(set(column)) == 1 and column[0] != BLANK \
                and headers[j] not in stay:
            same.append(f"{headers[j]} {column[0]}")
        else:
            keep.append(j)
    notes = []
    if same:
        notes.append("Same in every row: " + "; ".join(same) + ".")
    if equal:
        notes.append("Equal columns shown once: " + "; ".join(equal) + " in every row.")
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in body], notes


def blank_note(agg: list[dict], rows: list[CellResult], body: list[list[str]]) -> str:
    """Why cells are blank: the method does not measure that metric, or an attack was skipped."""
    if not any(BLANK in row for row in body):
        return ""
    skipped: dict[str, set[str]] = {}
    for row in rows:
        for attack in row.attacks_skipped:
            skipped.setdefault(row.method, set()).add(attack)
    why = "; ".join(f"{m}: {', '.join(sorted(a))}" for m, a in sorted(skipped.items()))
    attacks = (f" Attacks skipped because the method sends nothing they read — {why}."
               if why else "")
    return f"{BLANK}: not measured for that method (it reports no such metric).{attacks}"


def guarantee_words(rows: list[CellResult], spec: Any, scales: dict[str, float] | None = None
                    ) -> list[str]:
    """Each kind of guarantee in the table, said in words with its unit; ``scales`` (median
    nearest-neighbour distance by space, :func:`dpkit.report.reference.space_scales`) give η a
    size."""
    lines = []
    spaces = sorted({s["guarantee"].get("space") or "" for r in rows
                     for s in r.ledger.get("spends", [])
                     if s.get("guarantee", {}).get("notion") == "metric_dp"})
    etas = sorted({float(r.privacy["eta_per_token"]) for r in rows
                   if isinstance(r.privacy.get("eta_per_token"), (int, float))})
    for space in spaces:
        lines.append(f"η/token: metric DP (dχ-privacy) per token — outputs for two texts "
                     f"that differ in one token x → x′ are within a factor e^ε, ε = η·d(x, x′), "
                     f"d the L2 distance in {space or 'the embedding space'}.")
        scale = (scales or {}).get(space)
        if scale is not None:
            finite = [e for e in etas if math.isfinite(e) and e > 0]
            example = finite[len(finite) // 2] if finite else None
            at = (f"; at η = {example:g}, ε ≈ {example * scale:.3g} between a word and its "
                  "nearest neighbour, more for words further apart") if example else ""
            lines.append(f"  median distance from a word to its nearest neighbour there: "
                         f"{scale:.3g} (measured on up to 2,000 words){at}.")
        elif space:
            lines.append("  the median distance from a word to its nearest neighbour there is not "
                         "recorded in this run folder (runs write it to reference.json).")
    if any("eta_per_sequence" in r.privacy for r in rows):
        lines.append("η/sequence: metric DP per sequence — ε = η·d(x, x′) with d between "
                     "whole sequences (see the method's docs for its d).")
    if any("epsilon" in r.privacy for r in rows):
        p = spec.privacy
        lines.append(f"ε: (ε, δ)-DP of the cell's releases composed, at δ = {p.delta:g}, "
                     f"{p.neighboring} neighbours, {p.accountant.upper()} accountant; ∞ where "
                     "something crossed the wire without a guarantee.")
    if any("k_achieved" in r.privacy for r in rows):
        lines.append("k: (k, ε)-anonymity — each released row hides among at least k others "
                     "(the k achieved, not the k asked for), with ε its DP part.")
    return lines


def _label(row: dict) -> str:
    """The method, flagged when a seed's training was still improving at the end."""
    converged = row["values"].get("converged")
    return row["method"] if converged is None or converged >= 1 else f"{row['method']} (not converged)"


def short_reason(reason: str) -> str:
    """A table-sized name for a reason: the tensor it names (``gradients: …``), else its start."""
    head, sep, _ = reason.partition(":")
    if sep and len(head) <= 32:
        return head
    return reason if len(reason) <= 40 else reason[:39] + "…"


def fmt_stat(stat: Any) -> str:
    """``mean ± half-width`` of a :class:`dpkit.evidence.Summary` (the mean alone for one seed)."""
    if stat is None:
        return ""
    if stat.n > 1 and math.isfinite(stat.half_width) and stat.half_width > 0:
        return f"{_fmt(stat.mean)} ± {stat.half_width:.2g}"
    return _fmt(stat.mean)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "∞" if math.isinf(value) else f"{value:.4g}"
    return str(value)


def _plain(value: Any) -> str:
    if value is None:
        return BLANK
    if isinstance(value, float):
        return "∞" if math.isinf(value) else f"{value:g}"
    return str(value)


def wrap(note: str, width: int = 118) -> str:
    """A note folded to ``width`` columns, continuation lines indented like its first."""
    indent = " " * (len(note) - len(note.lstrip()) + 2)
    return textwrap.fill(note, width, subsequent_indent=indent, break_on_hyphens=False)


def render_rows(headers: list[str], body: list[list[str]]) -> str:
    """A GitHub-style table of strings."""
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def column_legend(headers: list[str], metrics: list[str]) -> str:
    """One line per metric column: what it measures and which way is better."""
    said = []
    for h in headers:
        if h in metrics:
            words = direction(h) or "which way is better is not known to dpkit"
            name = metric_label(h)
            said.append(f"{h}{' ' + arrow(h) if arrow(h) else ''}"
                        f"{f' {name}' if name != h.replace('_', ' ') else ''} — {words}")
    return "Columns: " + "; ".join(said) + "." if said else ""


def with_arrows(headers: list[str], metrics: list[str]) -> list[str]:
    """Metric headers marked ``↑`` (higher is better) or ``↓`` (lower is better)."""
    return [f"{h} {arrow(h)}" if h in metrics and arrow(h) else h for h in headers]
