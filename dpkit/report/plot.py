"""The privacy–utility plot of a run (matplotlib, Agg backend, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path

from dpkit.report.labels import axis_label, spans_orders


def _pick(preferred: str | None, names: list[str], hints: tuple[str, ...]) -> str | None:
    if preferred and preferred in names:
        return preferred
    for hint in hints:
        for n in names:
            if hint in n:
                return n
    return None


def plot_tradeoff(spec, agg: list[dict], metrics: list[str], path: Path,
                  verdicts: list | None = None) -> Path | None:
    """Three panels: utility vs x, privacy vs x, utility vs privacy; one line per method and
    value of each other swept parameter, error bars for the 95 % interval over seeds, axes named
    for people (a swept guarantee with its notion), log axes where values span orders of
    magnitude, and each claim's verdict marked where it applies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    utility = _pick(spec.report.utility, metrics, ("accuracy", "auc", "preservation", "cosine"))
    privacy = _pick(spec.report.privacy, metrics, ("inversion_top1", "pr_at", "top1", "mi"))
    utility = utility or (metrics[0] if metrics else None)
    if utility is None:
        return None
    x = spec.report.x or next((k for r in agg for k in r["point"]), None)
    by_line = lines_of(agg, x)
    panels = [(x, utility), (x, privacy), (privacy, utility)]
    panels = [p for p in panels if p[0] and p[1]]
    if not panels:  # no swept parameter and no privacy metric: nothing to draw against
        return None
    footer = _footer(verdicts or [])
    height = 4.2 + FOOTER_LINE * len(footer)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), height), squeeze=False)
    for ax, (xm, ym) in zip(axes[0], panels):
        assert xm and ym  # panels without both axes were dropped above
        for label, rows in by_line.items():
            _draw_method(ax, label, rows, xm, ym, xm == x)
        xs = [v for r in agg if (v := _value(r, xm, xm == x))]
        if (xm == x and spans_orders(xs, 20)) or (xm != x and spans_orders(xs)):
            ax.set_xscale("log")
        if spans_orders([r["values"].get(ym) for r in agg]):
            ax.set_yscale("log")
        _mark_claims(ax, verdicts or [], xm, ym)
        delta = getattr(getattr(spec, "privacy", None), "delta", 1e-5)
        ax.set_xlabel(axis_label(xm, agg, delta, xm == x), fontsize=8)
        ax.set_ylabel(axis_label(ym, agg, delta, False), fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{spec.name}: privacy–utility (bars: 95 % CI over seeds)")
    fig.tight_layout(rect=(0, FOOTER_LINE * len(footer) / height, 1, 1))
    for i, (text, colour) in enumerate(footer):
        fig.text(0.01, (FOOTER_LINE * (len(footer) - i) - 0.2) / height, text, fontsize=8,
                 color=colour)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lines_of(agg: list[dict], x: str | None) -> dict[str, list[dict]]:
    """Rows grouped into lines: one per method and value of every swept parameter but ``x``
    (``DPED, num_queries=300``), so points of different settings are never joined."""
    lines: dict[str, list[dict]] = {}
    for r in agg:
        other = ", ".join(f"{k}={_plain(v)}" for k, v in sorted(r["point"].items()) if k != x)
        lines.setdefault(f"{r['method']}, {other}" if other else r["method"], []).append(r)
    return lines


def _plain(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _draw_method(ax, method: str, rows: list[dict], xm: str, ym: str, sweep_axis: bool) -> None:
    pts = sorted(((_value(r, xm, sweep_axis), r["values"].get(ym), r) for r in rows),
                 key=lambda p: (p[0] is None, p[0] or 0.0))
    pts = [(a, b, r) for a, b, r in pts if b is not None and math.isfinite(b)]
    if not pts:
        return
    if all(a is None for a, _, _ in pts):
        if len(pts) > 1:  # several values and no x to place them at: nothing honest to draw
            return
        colour = ax._get_lines.get_next_color()
        ax.axhline(pts[0][1], linestyle="--", linewidth=1, label=method, color=colour)
        low, high = _interval(pts[0][2], ym)
        if high > low:
            ax.axhspan(low, high, color=colour, alpha=0.12, linewidth=0)
        return
    placed = [(float(a), b, r) for a, b, r in pts if a is not None]
    yerr = _errors([(b, _interval(r, ym)) for _, b, r in placed])
    xerr = None if sweep_axis else _errors([(a, _interval(r, xm)) for a, _, r in placed])
    ax.errorbar([a for a, _, _ in placed], [b for _, b, _ in placed], yerr=yerr, xerr=xerr,
                marker="o", capsize=3, label=method)


def _errors(centred: list[tuple[float, tuple[float, float]]]) -> list[list[float]]:
    """matplotlib's [[below], [above]] error lengths from (value, (low, high)) pairs."""
    return [[max(v - lo, 0.0) for v, (lo, _) in centred], [max(hi - v, 0.0) for v, (_, hi) in centred]]


def _interval(row: dict, name: str) -> tuple[float, float]:
    """The 95 % interval of a metric over seeds; the mean itself where there is none."""
    stat = row.get("stats", {}).get(name)
    mean = row["values"].get(name)
    if stat is None or not (math.isfinite(stat.ci_low) and math.isfinite(stat.ci_high)):
        return (mean, mean) if mean is not None else (math.nan, math.nan)
    return stat.ci_low, stat.ci_high


FOOTER_LINE = 0.25  # inches per verdict line under the panels
COLOURS = {"holds": "tab:green", "refuted": "tab:red", "undecided": "tab:gray"}


def _mark_claims(ax, verdicts: list, xm: str, ym: str) -> None:
    """Each claim's verdict symbol at its compared points, on the panel showing its metric."""
    from dpkit.evidence.verdict import MARKS

    for i, result in enumerate(verdicts, 1):
        c = result.spec
        axis = c.get("privacy") if c.get("at") == "matched" else c.get("over")
        if c.get("metric") != ym or axis != xm:
            continue
        for p in result.points:
            if isinstance(p.at, float) and math.isfinite(p.a_mean):
                ax.annotate(f"{MARKS[result.verdict]}{i}", (p.at, p.a_mean), fontsize=9,
                            color=COLOURS[result.verdict], xytext=(4, 6),
                            textcoords="offset points", fontweight="bold")


def _footer(verdicts: list) -> list[tuple[str, str]]:
    from dpkit.evidence.verdict import MARKS

    lines = []
    for i, r in enumerate(verdicts, 1):
        lines.append((f"{MARKS[r.verdict]}{i} {r.verdict}: {r.claim}"[:160], COLOURS[r.verdict]))
        if r.power_note:  # what the run could detect, and what the paper's effect needs
            lines.append((f"     {r.power_note}"[:200], COLOURS[r.verdict]))
    return lines


def _value(row: dict, name: str | None, sweep_axis: bool = False) -> float | None:
    """A row's value of ``name``: swept value, else metric. On the sweep axis, a method sweeping
    one other parameter (say ε where the axis is η) uses that parameter's value."""
    if name is None:
        return None
    point = row["point"]
    if name in point:
        v = point[name]
    elif sweep_axis and len(point) == 1 and name not in row["values"]:
        v = next(iter(point.values()))
    else:
        v = row["values"].get(name)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
