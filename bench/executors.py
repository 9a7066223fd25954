"""Wall time of one sweep on the local executor vs Ray on this machine (python -m bench.executors).

The sweep is the toy plug-in's noisy defense with a fixed per-cell cost (``sleep``) plus real
tensor work, so the ratio shows Ray's scheduling overhead and its parallel speed-up. Writes
bench/results/executors.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from dpkit.contract.plugins import get_registry

SPEC = """
name: bench_executors
data: {{name: toy_text, params: {{n_docs: 400}}}}
model: {{name: toy_space, params: {{dim: 64}}}}
defense: {{name: toy_noise, params: {{sleep: {sleep}}}, sweep: {{eta: {etas}}}}}
attacks: [{{name: toy_attack}}]
device: cpu
"""


def main() -> None:
    """Run the same sweep locally and on a local Ray; print wall times and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=1.0, help="fixed seconds of work per cell")
    args = parser.parse_args()
    os.environ["DPKIT_LOAD_PLUGINS"] = ""
    os.environ["DPKIT_EXTRA_PLUGINS"] = "toy=dpkit.testing.toy"
    from dpkit.runner import run_spec
    from dpkit.spec import parse_spec
    import yaml

    etas = [round(0.5 + i * 0.5, 2) for i in range(args.cells)]
    spec = parse_spec(yaml.safe_load(SPEC.format(sleep=args.sleep, etas=etas)), "bench", registry=get_registry())
    result = {"cells": args.cells, "sleep_per_cell_s": args.sleep, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        local = run_spec(spec, Path(tmp) / "local", show_progress=False, registry=get_registry())
        result["local_s"] = time.perf_counter() - t0
        try:
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {k: os.environ[k] for k in
                                               ("DPKIT_LOAD_PLUGINS", "DPKIT_EXTRA_PLUGINS")}})
            result["ray_start_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            remote = run_spec(spec, Path(tmp) / "ray", executor="ray", show_progress=False, registry=get_registry())
            result["ray_s"] = time.perf_counter() - t0
            ray.shutdown()
            same = {r["key"]: r["metrics"] for r in local.rows} == \
                   {r["key"]: r["metrics"] for r in remote.rows}
            result["same_metrics"] = same
            result["ray_over_local"] = result["ray_s"] / result["local_s"]
        except ImportError:
            result["ray"] = "not installed: pip install -e '.[ray]'"
    print(json.dumps(result, indent=2))
    if "ray_over_local" in result:
        print(f"Ray / local wall time: {result['ray_over_local']:.2f}× "
              f"(+{result['ray_start_s']:.1f} s to start Ray); metrics identical: "
              f"{result['same_metrics']}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "executors.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
