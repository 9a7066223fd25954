"""The privacy–utility plot of a run (matplotlib, Agg backend, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path


def _pick(preferred: str | None, names: list[str], hints: tuple[str, ...]) -> str | None:
    if preferred and preferred in names:
        return preferred
    for hint in hints:
        for n in names:
            if hint in n:
                return n
    return None


def plot_tradeoff(spec, agg: list[dict], metrics: list[str], path: Path) -> Path | None:
    """Three panels: utility vs x, privacy vs x, utility vs privacy; one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    utility = _pick(spec.report.utility, metrics, ("accuracy", "auc", "preservation", "cosine"))
    privacy = _pick(spec.report.privacy, metrics, ("inversion_top1", "pr_at", "top1", "mi"))
    utility = utility or (metrics[0] if metrics else None)
    if utility is None:
        return None
    x = spec.report.x or next((k for r in agg for k in r["point"]), None)
    by_method: dict[str, list[dict]] = {}
    for r in agg:
        by_method.setdefault(r["method"], []).append(r)
    panels = [(x, utility), (x, privacy), (privacy, utility)]
    panels = [p for p in panels if p[0] and p[1]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (xm, ym) in zip(axes[0], panels):
        for method, rows in by_method.items():
            pts = sorted(((_value(r, xm, xm == x), r["values"].get(ym)) for r in rows),
                         key=lambda p: (p[0] is None, p[0] or 0.0))
            pts = [(a, b) for a, b in pts if b is not None and math.isfinite(b)]
            if not pts:
                continue
            if all(a is None for a, _ in pts):
                if len(pts) > 1:  # several values and no x to place them at: nothing honest to draw
                    continue
                ax.axhline(pts[0][1], linestyle="--", linewidth=1, label=method,
                           color=ax._get_lines.get_next_color())
                continue
            pts = [(a, b) for a, b in pts if a is not None]
            ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=method)
        xs = [v for r in agg if (v := _value(r, xm, xm == x))]
        if xm == x and xs and min(xs) > 0 and max(xs) / min(xs) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(xm)
        ax.set_ylabel(ym)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{spec.name}: privacy–utility")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
