"""Tables a DPED run is read by, computed from ``results.jsonl`` alone (nothing read by eye).

``python -m dpkit_dped.summary runs/dped`` prints, as markdown:

- the headline metric (by default the calibrated held-out perplexity on the private corpus's test
  split, :mod:`dpkit_dped.scores`; lower is better; ``--metric`` picks another) per method and
  target ε, then the raw perplexity the same way, every cell's convergence flag and, where the method's training stopped
  early, how many cells kept their start (``best_step`` 0);
- **what private data bought each method over its own floor**: per ε, the paired difference
  floor − method over seeds (positive: the private corpus lowered the perplexity) with its
  two-sided 95 % t-interval. The floor of DP-SGD is its own recipe on public data at the same ε
  (``DP-SGD recipe, public data``); the floor of the teacher methods is their start, the public
  model (``public only``). The **crossover ε** is the smallest swept ε whose whole interval lies
  above 0 (with one seed: whose difference does);
- the reference rows: the teacher ensemble and each noiseless student with its ratio to it, and
  the share of the ensemble's calibrated gain over the public start each student recovers;
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
CALIBRATED = "perplexity_calibrated"
RECOVERED = ("ensemble_gain_recovered", "ensemble_gain_recovered_alt")
FLOOR, SGD_FLOOR, ENSEMBLE = "public only", "DP-SGD recipe, public data", "teacher ensemble"


def load_rows(run_dir: Path) -> list[dict]:
    """Finished cells of a run folder (the last row per cell key)."""
    rows: dict[str, dict] = {}
    for line in (Path(run_dir) / "results.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["key"]] = row
    return list(rows.values())


def method_label(row: dict) -> str:
    """The method with its query budget where it sweeps one (``DPED, 300 queries``)."""
    queries = row["point"].get("num_queries") if "point" in row else row["params"].get("num_queries")
    return f"{row['method']}, {queries} queries" if queries else row["method"]


def grouped(rows: list[dict], metric: str = HEADLINE) -> dict[str, dict[float, list[dict]]]:
    """label -> target ε (``inf`` for references) -> rows of each seed."""
    out: dict[str, dict[float, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if metric in row["metrics"]:
            eps = float(row["params"].get("target_epsilon", math.inf))
            out[method_label(row)][eps].append(row)
    return out


def floor_label(label: str) -> str:
    """The floor a private row is measured against: its own recipe on public data."""
    return SGD_FLOOR if label.split(",")[0] == "DP-SGD" else FLOOR


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and two-sided 95 % t-interval (the mean itself for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def floor_by_seed(floor_cells: dict[float, list[dict]], metric: str = HEADLINE) -> dict:
    """(ε, seed) -> the floor's metric; a floor without ε (a reference) is keyed ε = inf."""
    return {(eps, r["seed"]): r["metrics"][metric] for eps, rows in floor_cells.items() for r in rows}


def gains(cells: dict[float, list[dict]], floor: dict, metric: str = HEADLINE) -> dict[float, list[float]]:
    """ε -> floor − method of each seed that has a floor at that ε (or a reference floor)."""
    out = {}
    for eps, rows in sorted(cells.items()):
        pairs = [floor.get((eps, r["seed"]), floor.get((math.inf, r["seed"])))
                 for r in rows]
        out[eps] = [f - r["metrics"][metric] for f, r in zip(pairs, rows) if f is not None]
    return out


def crossover(per_eps: dict[float, list[float]]) -> float | None:
    """Smallest ε whose gains' 95 % interval lies above 0 (one seed: whose gain does)."""
    for eps, values in sorted(per_eps.items()):
        if values and interval(values)[1] > 0:
            return eps
    return None


def fmt(x: float) -> str:
    """A number for a table."""
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e6:
        return f"{x:.1e}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_interval(values: list[float]) -> str:
    """``mean [low, high]``, or the value alone for one seed."""
    mean, low, high = interval(values)
    return fmt(mean) if len(values) < 2 else f"{fmt(mean)} [{fmt(low)}, {fmt(high)}]"


def _private(groups: dict) -> list[str]:
    return sorted(label for label, cells in groups.items() if math.inf not in cells
                  and label not in (SGD_FLOOR,))


def headline_table(rows: list[dict], metric: str = HEADLINE) -> list[str]:
    """Markdown lines: metric per method and ε (mean over seeds), seeds, convergence."""
    groups = grouped(rows, metric)
    if FLOOR not in groups:
        raise ValueError(f"no finished {FLOOR!r} cell with {metric!r} in these results; run the "
                         "dped_public baseline (labelled 'public only') to get the floor")
    epsilons = sorted({e for cells in groups.values() for e in cells if math.isfinite(e)})
    columns = " | ".join(f"ε={fmt(e)}" for e in epsilons)
    lines = [f"| method | {columns} | seeds | not converged | kept its start |",
             "|---" * (len(epsilons) + 4) + "|"]
    for label, cells in sorted(groups.items()):
        reference = math.inf in cells
        values = []
        for eps in [math.inf] if reference else epsilons:
            runs = cells.get(eps, [])
            values.append(fmt(statistics.fmean(r["metrics"][metric] for r in runs)) if runs else "–")
        values = values * len(epsilons) if reference else values
        runs = [r for c in cells.values() for r in c]
        stuck = sum(r["metrics"].get("converged", 1.0) < 1 for r in runs)
        stopped = [r["metrics"]["best_step"] for r in runs if "best_step" in r["metrics"]]
        kept = f"{sum(b == 0 for b in stopped)} of {len(stopped)}" if stopped else "–"
        seeds = len({r["seed"] for r in runs})
        lines.append(f"| {label} | {' | '.join(values)} | {seeds} | {stuck} | {kept} |")
    return lines


def gains_table(rows: list[dict], metric: str = HEADLINE) -> list[str]:
    """Markdown lines: floor − method per private method and ε, 95 % interval, crossover ε."""
    groups = grouped(rows, metric)
    epsilons = sorted({e for label in _private(groups) for e in groups[label]})
    lines = [f"| method | floor | {' | '.join(f'ε={fmt(e)}' for e in epsilons)} | crossover ε |",
             "|---" * (len(epsilons) + 3) + "|"]
    for label in _private(groups):
        floor = floor_label(label)
        if floor not in groups:
            continue
        per_eps = gains(groups[label], floor_by_seed(groups[floor], metric), metric)
        cells = [fmt_interval(per_eps[e]) if per_eps.get(e) else "–" for e in epsilons]
        cross = crossover(per_eps)
        lines.append(f"| {label} | {floor} | {' | '.join(cells)} | "
                     f"{'none in range' if cross is None else fmt(cross)} |")
    return lines


def reference_table(rows: list[dict], metric: str = HEADLINE) -> list[str]:
    """Markdown lines: the ensemble and every noiseless row, with its ratio to the ensemble."""
    groups = grouped(rows, metric)
    ensemble = {r["seed"]: r["metrics"][metric] for r in groups.get(ENSEMBLE, {}).get(math.inf, [])}
    lines = [f"| reference | {metric} | ratio to the {ENSEMBLE} | seeds |", "|---|---|---|---|"]
    for label, cells in sorted(groups.items()):
        if math.inf not in cells:
            continue
        runs = cells[math.inf]
        ratios = [r["metrics"][metric] / ensemble[r["seed"]] for r in runs if r["seed"] in ensemble]
        ratio = fmt_interval(ratios) if ratios else "–"
        lines.append(f"| {label} | {fmt_interval([r['metrics'][metric] for r in runs])} | {ratio} | "
                     f"{len(runs)} |")
    return lines


def recovery_table(rows: list[dict]) -> list[str]:
    """Markdown lines: the share of the ensemble's calibrated gain over the public start that each
    reference row recovers (on calibration halves A and B), mean and 95 % interval over seeds."""
    lines = ["| reference | recovered (half A) | recovered (half B) | seeds |", "|---|---|---|---|"]
    for label, cells in sorted(grouped(rows, RECOVERED[0]).items()):
        if math.inf not in cells:
            continue
        runs = cells[math.inf]
        shares = [fmt_interval([r["metrics"][m] for r in runs if m in r["metrics"]])
                  for m in RECOVERED]
        lines.append(f"| {label} | {shares[0]} | {shares[1]} | {len(runs)} |")
    return lines


def paired_differences(rows: list[dict], a: str, b: str, metric: str = HEADLINE) -> list[str]:
    """Markdown lines: mean of A − B over seeds at each ε both have (negative: A lower)."""
    groups = grouped(rows, metric)
    lines = [f"| ε | {a} | {b} | {a} − {b} [95 % CI] | seeds |", "|---|---|---|---|---|"]
    for eps in sorted(set(groups.get(a, {})) & set(groups.get(b, {}))):
        by_seed_a = {r["seed"]: r["metrics"][metric] for r in groups[a][eps]}
        by_seed_b = {r["seed"]: r["metrics"][metric] for r in groups[b][eps]}
        seeds = sorted(set(by_seed_a) & set(by_seed_b))
        if seeds:
            lines.append(f"| {fmt(eps)} | {fmt(statistics.fmean(by_seed_a[s] for s in seeds))} | "
                         f"{fmt(statistics.fmean(by_seed_b[s] for s in seeds))} | "
                         f"{fmt_interval([by_seed_a[s] - by_seed_b[s] for s in seeds])} | "
                         f"{len(seeds)} |")
    return lines


def main() -> None:
    """Print the tables of one run folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--metric", default=CALIBRATED)
    args = parser.parse_args()
    rows = load_rows(args.run_dir)
    sections = [(f"Held-out {args.metric} (mean over seeds)", headline_table(rows, args.metric)),
                ("What private data bought: floor − method, 95 % interval over seeds",
                 gains_table(rows, args.metric)),
                ("Reference rows", reference_table(rows, args.metric)),
                ("Share of the ensemble's calibrated gain over the public start recovered",
                 recovery_table(rows))]
    if args.metric != HEADLINE:
        sections.insert(1, ("Raw held-out perplexity (mean over seeds)",
                            headline_table(rows, HEADLINE)))
    for queries in (3000, 300):
        for other in (f"PATE, {queries} queries", "DP-SGD"):
            sections.append((f"DPED, {queries} queries − {other}",
                             paired_differences(rows, f"DPED, {queries} queries", other, args.metric)))
    for title, lines in sections:
        print(f"\n{title}\n")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
