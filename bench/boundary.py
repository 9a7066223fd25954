"""What the server's own process costs (python -m bench.boundary [--specs specs/quick.yaml ...]).

Two measurements, each against the same code with the server in the client's process (still
exchanging bytes, so only the process boundary differs):

1. per message: round trips of tensors of several sizes through a fresh server process and
   through the in-process host, and the cost of starting one server process;
2. per spec: the wall time of whole specs run with ``DPKIT_SERVER=process`` (dpkit's default)
   and ``DPKIT_SERVER=inprocess`` into fresh folders, alternating (``--rounds``, best of each),
   their ratio, and whether every metric and ledger entry came out the same.

Prints ratios and writes bench/results/boundary.json. Run it on a quiet machine: the spec part
takes twice the specs' own time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = ((1, 1), (64, 384), (2048, 384), (32768, 384))
SECRET = ".dpkit-noise-secret"
ENVIRONMENT = dict(os.environ)  # as started: the per-message part narrows the plug-ins


def per_message(repeats: int) -> dict:
    """Seconds per round trip by tensor size, for a server process and the in-process host."""
    import torch

    os.environ["DPKIT_LOAD_PLUGINS"] = ""
    os.environ["DPKIT_EXTRA_PLUGINS"] = "toy=dpkit.testing.toy"
    import dpkit.contract.plugins
    from dpkit.boundary.channel import InProcessChannel, ProcessChannel
    from dpkit.release.codec import decode, encode

    registry = dpkit.contract.plugins.get_registry()
    init = {"defense": "toy_noise", "params": {}, "model": None, "datasets": [], "seed": 1,
            "device": "cpu", "plugins": dict(registry.modules)}
    preload = sorted(set(init["plugins"].values()))  # as the runner's connector does
    t0 = time.perf_counter()
    first = ProcessChannel(init, preload=preload)
    started_first = time.perf_counter() - t0
    first.close()
    starts = []
    for _ in range(5):
        t0 = time.perf_counter()
        process = ProcessChannel(init, preload=preload)
        starts.append(time.perf_counter() - t0)
        process.close()
    started = sorted(starts)[len(starts) // 2]
    process = ProcessChannel(init, preload=preload)
    local = InProcessChannel(init, registry)
    rows = []
    for n, d in SIZES:
        message = encode({"op": "message", "name": "embeddings", "phase": "run", "batch": 0,
                          "tensor": torch.randn(n, d), "mask": None})
        timing = {}
        for label, channel in (("process", process), ("inprocess", local)):
            decode(channel.request(message))  # warm
            t0 = time.perf_counter()
            for _ in range(repeats):
                decode(channel.request(message))
            timing[label] = (time.perf_counter() - t0) / repeats
        rows.append({"rows": n, "dim": d, "mb": round(n * d * 4 / 2**20, 3),
                     "process_ms": round(1e3 * timing["process"], 3),
                     "inprocess_ms": round(1e3 * timing["inprocess"], 3),
                     "ratio": round(timing["process"] / timing["inprocess"], 2)})
    process.close()
    return {"start_first_process_s": round(started_first, 3),
            "start_process_s": round(started, 3), "round_trips": rows}


def _same(a: object, b: object) -> bool:
    """Equal, counting NaN equal to NaN (an undefined metric, as JSON loads it)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def per_spec(spec: str, rounds: int = 2, seeds: int | None = None) -> dict:
    """Wall time of ``spec`` run with the server in its own process and in-process, alternating
    ``rounds`` times (the process first, so a cold cache penalises it); the best of each.
    ``seeds``: run seeds 0..N-1 only (``dpkit run --seeds``), for a spec too long to run whole."""
    out: dict = {"spec": spec, "rounds": rounds, "seeds": seeds}
    walls: dict[str, list[float]] = {"process": [], "inprocess": []}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        secret = None
        for round_ in range(rounds):
            for kind in ("process", "inprocess"):
                env = {**ENVIRONMENT, "DPKIT_SERVER": kind, "DPKIT_BUDGET_STORE": "off"}
                folder = Path(tmp) / f"{kind}-{round_}"
                if secret is not None:  # the same noise secret: the same draws, same results
                    folder.mkdir()
                    shutil.copy(secret, folder / SECRET)
                cmd = [sys.executable, "-m", "dpkit", "run", spec, "--out", str(folder),
                       "--no-progress", *(["--seeds", str(seeds)] if seeds else [])]
                t0 = time.perf_counter()
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(f"{spec} ({kind}) failed:\n{done.stderr[-2000:]}")
                walls[kind].append(round(time.perf_counter() - t0, 1))
                secret = secret or folder / SECRET
                lines = (folder / "results.jsonl").read_text().splitlines()
                rows[kind, round_] = {r["key"]: (r["metrics"], r["ledger"])
                                      for r in map(json.loads, lines)}
    for kind, times in walls.items():
        out[f"{kind}_wall_s"] = min(times)
        out[f"{kind}_walls_s"] = times
    out["process_over_inprocess"] = round(out["process_wall_s"] / out["inprocess_wall_s"], 3)
    first = rows["process", 0]
    out["differences"] = sorted({f"{key}: {name}" for other in rows.values() for key in first
                                 for name, value in first[key][0].items()
                                 if not _same(other.get(key, ({}, None))[0].get(name), value)}
                                | {f"{key}: ledger" for other in rows.values() for key in first
                                   if not _same(other.get(key, ({}, None))[1], first[key][1])})
    out["same_results"] = not out["differences"] and all(set(r) == set(first) for r in rows.values())
    return out


def main() -> None:
    """Measure, print the ratios, write bench/results/boundary.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--specs", nargs="*", default=[], help="specs to time both ways")
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each spec")
    parser.add_argument("--seeds", type=int, default=None,
                        help="run seeds 0..N-1 of each spec only (default: the spec's seeds)")
    args = parser.parse_args()
    result = {"cpus": os.cpu_count(), "load_average_start": os.getloadavg(),
              "messages": per_message(args.repeats),
              "specs": [per_spec(s, args.rounds, args.seeds) for s in args.specs]}
    result["load_average_end"] = os.getloadavg()
    result["cpu_s"] = {"self": sum(os.times()[:2]), "children": sum(os.times()[2:4])}
    print(json.dumps(result, indent=2))
    for row in result["messages"]["round_trips"]:
        print(f"{row['mb']:>8} MB message: {row['process_ms']} ms through a server process, "
              f"{row['inprocess_ms']} ms in-process ({row['ratio']}×)")
    for spec in result["specs"]:
        seeds = f" (seeds 0..{spec['seeds'] - 1})" if spec["seeds"] else ""
        print(f"{spec['spec']}{seeds}: {spec['process_wall_s']} s with the server in its own process, "
              f"{spec['inprocess_wall_s']} s in-process: {spec['process_over_inprocess']}×; "
              f"identical results: {spec['same_results']}"
              + (f" (differ: {', '.join(spec['differences'][:6])})" if spec["differences"] else ""))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "boundary.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
