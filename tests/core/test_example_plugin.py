"""The third-party template plug-in works exactly like a built-in one (CI installs it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

INSTALLED = importlib.util.find_spec("dpkit_example") is not None
pytestmark = pytest.mark.skipif(not INSTALLED and not os.environ.get("CI"),
                                reason="pip install -e examples/dpkit-example-plugin")


def run(*args, env):
    return subprocess.run([sys.executable, "-m", "dpkit.cli.main", *map(str, args)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def test_example_plugin_is_listed():
    result = run("plugins", "--json", env={"DPKIT_LOAD_PLUGINS": "example"})
    table = {p["name"]: p for p in json.loads(result.stdout)}
    assert table["example"]["components"] == {"mechanism": ["clipped_gaussian"]}
    assert table["example"]["version"] == "0.1.0"
    assert not table["example"]["errors"]


def test_example_mechanism_runs_from_a_spec(tmp_path):
    spec = tmp_path / "rr.yaml"
    spec.write_text(f"""
name: rr
data: {{name: toy_text, params: {{n_docs: 40}}}}
model: {{name: toy_space}}
mechanism: {{name: clipped_gaussian, params: {{clip: 3.0}}, sweep: {{noise_multiplier: [0.02, 2.0]}}}}
device: cpu
output: {tmp_path / 'out'}
""")
    env = {"DPKIT_LOAD_PLUGINS": "example,tasks,attacks", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
    result = run("run", spec, "--no-progress", env=env)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    little, much = sorted(rows, key=lambda r: r["params"]["noise_multiplier"])
    assert much["metrics"]["token_preservation"] < little["metrics"]["token_preservation"]
    assert much["privacy"]["epsilon"] < little["privacy"]["epsilon"]
    # an (ε, δ) per-token guarantee is reported per document: the longest document's tokens compose
    import dp_accounting

    spend = much["ledger"]["spends"][0]
    assert spend["count"] == 8  # toy documents have 8 tokens each
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(2.0), 8)
    assert abs(much["privacy"]["epsilon"] - accountant.get_epsilon(1e-5)) < 1e-9
