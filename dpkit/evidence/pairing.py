"""Pairing a claim's two methods on seeds: at equal sweep values, or interpolated at matched privacy.

Works on finished result rows and, before a run, on expanded cells (both carry ``method``,
``point``, ``params`` and ``seed``), so a spec's claims are checked before any cell runs.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from dpkit.evidence.claims import Claim

if TYPE_CHECKING:
    from dpkit.base.results import CellResult


class Row(Protocol):
    """What claims pair on: a finished :class:`~dpkit.base.results.CellResult`, or a spec's
    cell before it runs (the same four fields)."""

    @property
    def method(self) -> str: ...

    @property
    def point(self) -> dict[str, Any]: ...

    @property
    def params(self) -> dict[str, Any]: ...

    @property
    def seed(self) -> int: ...


R = TypeVar("R", bound=Row)


class ClaimError(ValueError):
    """A claim that cannot be evaluated on these cells; ``field`` is the claim key at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def norm(value):
    """A sweep value in comparable form (numbers as floats, the rest as text)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return str(value)


def setting(row: Row, key: str):
    """The row's value of ``key``: its sweep point, else its params (dotted path), else None."""
    if key in row.point:
        return row.point[key]
    node = row.params
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def select(rows: Sequence[R], claim: Claim, label: str, field: str) -> list[R]:
    """Rows of method ``label`` that agree with the claim's ``where`` (absent keys agree)."""
    labels = sorted({r.method for r in rows})
    mine = [r for r in rows if r.method == label]
    if not mine:
        raise ClaimError(field, f"no method labelled {label!r}; labels in this spec: "
                         f"{', '.join(repr(x) for x in labels)}")
    kept = [r for r in mine if all(setting(r, k) is None or norm(setting(r, k)) == norm(v)
                                   for k, v in claim.where.items())]
    if not kept:
        raise ClaimError("where", f"no cell of {label!r} matches where={claim.where}")
    return kept


def by_point_and_seed(rows: Sequence[Row], key: str | None, label: str) -> dict:
    """{sweep value or None: {seed: row}}; several cells at one (value, seed) is an error."""
    table: dict = defaultdict(dict)
    for r in rows:
        value = setting(r, key) if key else None
        at = None if value is None else norm(value)
        if r.seed in table[at]:
            other = table[at][r.seed]
            differ = sorted(k for k in {**r.point, **other.point}
                            if r.point.get(k) != other.point.get(k))
            raise ClaimError("where", f"{label!r} has several cells at {key}={value} seed "
                             f"{r.seed} (they differ in {', '.join(differ) or 'params'}); "
                             f"add where: {{{(differ or ['KEY'])[0]}: VALUE}} to pick one")
        table[at][r.seed] = r
    return table


def equal_layout(claim: Claim, rows: Sequence[Row]) -> list[tuple[object, dict, dict]]:
    """[(point, A's {seed: row}, B's {seed: row})] at each compared sweep value."""
    a = by_point_and_seed(select(rows, claim, claim.method, "method"), claim.over, claim.method)
    b = by_point_and_seed(select(rows, claim, claim.versus, "versus"), claim.over, claim.versus)
    swept = sorted({p for p in (*a, *b) if p is not None}, key=_order)
    if claim.points == "all":
        wanted = [p for p in swept if (p in a or None in a) and (p in b or None in b)]
        if not wanted and swept:
            raise ClaimError("points", f"{claim.method!r} and {claim.versus!r} share no value of "
                             f"{claim.over} ({claim.method}: {_values(a)}; {claim.versus}: "
                             f"{_values(b)})")
        wanted = wanted or [None]
    else:
        wanted = [norm(p) for p in claim.points]
    layout = []
    for p in wanted:
        for label, table in ((claim.method, a), (claim.versus, b)):
            if p not in table and None not in table:
                raise ClaimError("points", f"{label!r} has no cell at {claim.over}={p} "
                                 f"(it has {claim.over}: {_values(table)})")
        layout.append((p, a[p] if p in a else a[None], b[p] if p in b else b[None]))
    return layout


def _values(table: dict) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                     for v in sorted(table, key=_order) if v is not None) or "none"


def _order(v) -> tuple:
    return (0, v, "") if isinstance(v, float) else (1, 0.0, str(v))


def value(row: CellResult, name: str) -> float | None:
    """A metric of a finished row, or one of its ledger numbers."""
    v = row.metrics.get(name, row.privacy.get(name))
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def equal_pairs(claim: Claim, rows: list[CellResult]) -> list[tuple[object, list[tuple[int, float, float]]]]:
    """[(point, [(seed, A's metric, B's metric)])] on the seeds both methods finished."""
    out = []
    for p, a, b in equal_layout(claim, rows):
        pairs = [(s, value(a[s], claim.metric), value(b[s], claim.metric))
                 for s in sorted(set(a) & set(b))]
        out.append((p, [(s, x, y) for s, x, y in pairs if x is not None and y is not None]))
    return out


def _curve(rows: list[CellResult], privacy: str, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(privacy values ascending, metric values) of one method and seed; ties averaged."""
    pts = defaultdict(list)
    for r in rows:
        x, y = value(r, privacy), value(r, metric)
        if x is not None and y is not None and math.isfinite(x) and math.isfinite(y):
            pts[x].append(y)
    if not pts:
        return None
    xs = sorted(pts)
    return np.array(xs), np.array([sum(pts[x]) / len(pts[x]) for x in xs])


def matched_pairs(claim: Claim, rows: list[CellResult]) -> tuple[list[tuple[float, list]], str]:
    """Per seed, A's and B's metric interpolated linearly at common privacy values.

    Returns ``([(privacy value, [(seed, A, B)])], note)``; an empty list with the reason in
    ``note`` when the methods' privacy ranges do not overlap on every paired seed.
    """
    privacy = claim.privacy or ""  # the schema requires it with at: matched
    curves, knots = {}, set()
    for label, field in ((claim.method, "method"), (claim.versus, "versus")):
        per_seed, per_point = defaultdict(list), defaultdict(list)
        for r in select(rows, claim, label, field):
            per_seed[r.seed].append(r)
            if (x := value(r, privacy)) is not None and math.isfinite(x):
                per_point[json.dumps(r.point, sort_keys=True, default=str)].append(x)
        knots |= {sum(xs) / len(xs) for xs in per_point.values()}
        curves[label] = {s: c for s, rs in per_seed.items()
                         if (c := _curve(rs, privacy, claim.metric)) is not None}
    a, b = curves[claim.method], curves[claim.versus]
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return [], f"no seed on which both methods report {claim.privacy} and {claim.metric}"
    low = max(max(a[s][0][0], b[s][0][0]) for s in seeds)
    high = min(min(a[s][0][-1], b[s][0][-1]) for s in seeds)
    if low > high:
        span = {lab: (min(c[s][0][0] for s in seeds), max(c[s][0][-1] for s in seeds))
                for lab, c in curves.items()}
        return [], (f"the {claim.privacy} ranges do not overlap on every seed: "
                    + "; ".join(f"{k} spans {lo:.4g}–{hi:.4g}" for k, (lo, hi) in span.items()))
    if claim.points == "all":
        grid = sorted(x for x in knots if low <= x <= high) or [low]
    else:
        grid = [float(p) for p in claim.points]
        outside = [p for p in grid if not low <= p <= high]
        if outside:
            return [], (f"points {outside} lie outside the range where both methods have "
                        f"{claim.privacy} on every seed ({low:.4g}–{high:.4g})")
    return [(x, [(s, float(np.interp(x, *a[s])), float(np.interp(x, *b[s]))) for s in seeds])
            for x in grid], f"{claim.privacy} overlap {low:.4g}–{high:.4g}"
