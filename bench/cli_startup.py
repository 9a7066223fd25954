"""How fast the command line starts: ``dpkit --help``, ``dpkit validate`` and ``dpkit budget status``
against an empty interpreter and ``import torch``.

Run: ``python -m bench.cli_startup [--repeat 5] [--spec specs/quick.yaml]``. Each command runs
``--repeat`` times in a fresh interpreter; the median wall and CPU seconds (user + system of the
child) are printed with their ratios to ``python -c pass`` and ``python -c "import torch"``, the
load average before and after, whether the command imported torch or dp-accounting (one more run
with ``-X importtime``), and the targets: ``dpkit --help`` ≤ 0.3 s and ``dpkit validate`` ≤ 1.5 s
of CPU. Results go to ``bench/results/cli_startup.json``. Time on a quiet machine: other work on
the same cores inflates the wall time (the load average says how quiet it was).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"dpkit --help": 0.3, "dpkit validate": 1.5}
"""CPU seconds each command must stay under (issue 40)."""
WATCHED = ("torch", "dp_accounting", "sklearn", "scipy", "transformers")


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``cmd`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Which of :data:`WATCHED` the command imports (``python -X importtime``)."""
    if cmd[0] != sys.executable:
        return []
    done = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True,
                          text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    return [m for m in WATCHED if m in names]


def measure(name: str, cmd: list[str], env: dict[str, str], repeat: int) -> dict:
    """Median wall and CPU of ``repeat`` runs, and the heavy modules the command imports."""
    runs = [run_once(cmd, env) for _ in range(repeat)]
    return {"command": name, "wall_s": statistics.median(w for w, _ in runs),
            "cpu_s": statistics.median(c for _, c in runs), "runs": repeat,
            "imports": imported(cmd, env)}


def commands(spec: str) -> dict[str, list[str]]:
    """The commands timed: two baselines, then dpkit's (run as ``python -m dpkit``)."""
    py, dpkit = sys.executable, [sys.executable, "-m", "dpkit"]
    return {"python -c pass": [py, "-c", "pass"],
            "python -c 'import torch'": [py, "-c", "import torch"],
            "dpkit --help": [*dpkit, "--help"],
            "dpkit validate": [*dpkit, "validate", spec],
            "dpkit budget status": [*dpkit, "budget", "status"]}


def main(argv: list[str] | None = None) -> None:
    """Time every command; print the table and the targets; save the numbers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--spec", default="specs/quick.yaml")
    ap.add_argument("--out", default="bench/results/cli_startup.json")
    args = ap.parse_args(argv)
    env = {**os.environ, "DPKIT_BUDGET_STORE": str(Path(tempfile.mkdtemp()) / "budget.db")}
    load_before = os.getloadavg()
    rows = [measure(n, c, env, args.repeat) for n, c in commands(args.spec).items()]
    load_after = os.getloadavg()
    empty, torch_row = rows[0], rows[1]
    print(f"{'command':28} {'wall s':>7} {'CPU s':>7} {'CPU/pass':>9} {'CPU/torch':>10}  imports")
    for r in rows:
        r["cpu_vs_pass"] = r["cpu_s"] / empty["cpu_s"]
        r["cpu_vs_torch"] = r["cpu_s"] / torch_row["cpu_s"]
        print(f"{r['command']:28} {r['wall_s']:7.3f} {r['cpu_s']:7.3f} {r['cpu_vs_pass']:9.1f} "
              f"{r['cpu_vs_torch']:10.2f}  {', '.join(r['imports']) or '-'}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"(medians of {args.repeat} runs; spec {args.spec})")
    for name, limit in TARGETS.items():
        cpu = next(r["cpu_s"] for r in rows if r["command"] == name)
        print(f"target {name}: {cpu:.3f} s CPU ≤ {limit} s: {'met' if cpu <= limit else 'MISSED'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "load_before": load_before, "load_after": load_after,
                               "targets": TARGETS}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
