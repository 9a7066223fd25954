"""Tables a DPED run is read by, computed from ``results.jsonl`` alone (nothing read by eye).

``python -m dpkit_dped.summary runs/dped`` prints, as markdown:

- the headline metric (held-out perplexity on the private corpus's test split, lower is better)
  per method and target ε, with the public-only floor and the non-private ceiling, every
  cell's convergence flag and, where the method's training stopped early, how many cells kept
  their start (``best_step`` 0: the student learned nothing that its stopping data rewarded);
- per method, the **crossover ε**: the smallest swept ε at which the method beats the public-only
  floor — its difference to the floor of the same seed below 0 on average, and with two or more
  seeds the upper end of the paired differences' two-sided 95 % t-interval too;
- the paper's comparison (DPED against PATE and DP-SGD at equal ε): the mean paired difference.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from scipy import stats

HEADLINE = "perplexity"
FLOOR, CEILING = "public only", "non-private"


def load_rows(run_dir: Path) -> list[dict]:
    """Finished cells of a run folder (the last row per cell key)."""
    rows: dict[str, dict] = {}
    for line in (Path(run_dir) / "results.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["key"]] = row
    return list(rows.values())


def method_label(row: dict) -> str:
    """The method with its query budget where it has one (``DPED, 300 queries``)."""
    queries = row["params"].get("num_queries")
    label = row["method"]
    return f"{label}, {queries} queries" if queries and "faithful" not in label else label


def grouped(rows: list[dict], metric: str = HEADLINE) -> dict[str, dict[float, list[dict]]]:
    """label -> target ε (``inf`` for references) -> rows of each seed."""
    out: dict[str, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if metric in row["metrics"]:
            eps = float(row["params"].get("target_epsilon", math.inf))
            out[method_label(row)][eps].append(row)
    return out


def mean_and_upper(values: list[float]) -> tuple[float, float]:
    """Mean and the upper end of the two-sided 95 % t-interval (the mean itself for one seed)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean + half


def crossover(cells: dict[float, list[dict]], floor: float | dict[int, float],
              metric: str = HEADLINE) -> float | None:
    """Smallest ε whose cells beat the floor (lower metric) with confidence; ``None`` if none does.

    Each cell is compared with the floor of its own seed (``floor`` maps seed -> value; a seed
    without a floor cell, or a plain number, uses the mean floor): the paired differences' mean
    and, with two or more seeds, the upper end of their 95 % t-interval must be below 0. A
    student that kept its public start therefore never counts as beating the floor.
    """
    if isinstance(floor, dict):
        by_seed, mean_floor = floor, statistics.fmean(floor.values())
    else:
        by_seed, mean_floor = {}, float(floor)
    for eps in sorted(cells):
        diffs = [r["metrics"][metric] - by_seed.get(r["seed"], mean_floor) for r in cells[eps]]
        _, upper = mean_and_upper(diffs)
        if upper < 0:
            return eps
    return None


def fmt(x: float) -> str:
    """A number for a table."""
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e6:
        return f"{x:.1e}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def headline_table(rows: list[dict], metric: str = HEADLINE) -> list[str]:
    """Markdown lines: metric per method and ε, crossover, convergence."""
    groups = grouped(rows, metric)
    floor_rows = [r for cells in groups.get(FLOOR, {}).values() for r in cells]
    if not floor_rows:
        raise ValueError(f"no finished {FLOOR!r} cell with {metric!r} in these results; run the "
                         "dped_public baseline (labelled 'public only') to get the floor")
    floor = {r["seed"]: r["metrics"][metric] for r in floor_rows}
    epsilons = sorted({e for cells in groups.values() for e in cells if math.isfinite(e)})
    columns = " | ".join(f"ε={fmt(e)}" for e in epsilons)
    lines = [f"| method | {columns} | crossover ε | not converged | kept its start |",
             "|---" * (len(epsilons) + 4) + "|"]
    for label, cells in sorted(groups.items()):
        values = []
        for eps in epsilons if math.inf not in cells else [math.inf]:
            runs = cells.get(eps, [])
            values.append(fmt(statistics.fmean(r["metrics"][metric] for r in runs)) if runs else "–")
        if math.inf in cells:
            values = values * len(epsilons)
        runs = [r for c in cells.values() for r in c]
        stuck = sum(r["metrics"].get("converged", 1.0) < 1 for r in runs)
        stopped = [r["metrics"]["best_step"] for r in runs if "best_step" in r["metrics"]]
        kept = f"{sum(b == 0 for b in stopped)} of {len(stopped)}" if stopped else "–"
        cross = "reference" if math.inf in cells else crossover(cells, floor, metric)
        cross = "none in range" if cross is None else (cross if isinstance(cross, str) else fmt(cross))
        lines.append(f"| {label} | {' | '.join(values)} | {cross} | {stuck} | {kept} |")
    return lines


def paired_differences(rows: list[dict], a: str, b: str, metric: str = HEADLINE) -> list[str]:
    """Markdown lines: mean of A − B over seeds at each ε both have (negative: A lower)."""
    groups = grouped(rows, metric)
    lines = [f"| ε | {a} | {b} | mean {a} − {b} | seeds | A lower in every seed |",
             "|---|---|---|---|---|---|"]
    for eps in sorted(set(groups.get(a, {})) & set(groups.get(b, {}))):
        by_seed_a = {r["seed"]: r["metrics"][metric] for r in groups[a][eps]}
        by_seed_b = {r["seed"]: r["metrics"][metric] for r in groups[b][eps]}
        seeds = sorted(set(by_seed_a) & set(by_seed_b))
        diffs = [by_seed_a[s] - by_seed_b[s] for s in seeds]
        if diffs:
            lines.append(f"| {fmt(eps)} | {fmt(statistics.fmean(by_seed_a[s] for s in seeds))} | "
                         f"{fmt(statistics.fmean(by_seed_b[s] for s in seeds))} | "
                         f"{fmt(statistics.fmean(diffs))} | {len(seeds)} | "
                         f"{'yes' if all(d < 0 for d in diffs) else 'no'} |")
    return lines


def main() -> None:
    """Print the tables of one run folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--metric", default=HEADLINE)
    parser.add_argument("--queries", type=int, default=3000, help="query budget of the comparison")
    args = parser.parse_args()
    rows = load_rows(args.run_dir)
    print("\n".join(headline_table(rows, args.metric)))
    for other in (f"PATE, {args.queries} queries", "DP-SGD"):
        print()
        print("\n".join(paired_differences(rows, f"DPED, {args.queries} queries", other,
                                           args.metric)))


if __name__ == "__main__":
    main()
