"""``dpkit run --seeds`` with claims, ``dpkit report`` re-rendering and merging run folders."""

from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys

import pytest

from dpkit.runner.secret import FILE as SECRET_FILE
import torch

TOY_ENV = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}


def dpkit(*args, env=TOY_ENV):
    return subprocess.run([sys.executable, "-m", "dpkit.cli.main", *map(str, args)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
                          check=False)

SPEC = """
name: ev
data: {{name: toy_text, params: {{n_docs: {docs}}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, label: Toy, params: {{eta: 1.0}}, sweep: {{eta: [1.0, 4.0]}}}}
baselines:
  - {{name: toy_noise, label: Toy-sleep, params: {{eta: 1.0, sleep: 0.0001}},
     sweep: {{eta: [1.0, 4.0]}}}}
seeds: {seeds}
device: {device}
report: {{x: eta, utility: preserved}}
privacy: {{common_noise: true}}  # Toy and Toy-sleep on one noise stream (paired draws)
output: {out}
claims:
  - {{method: Toy, versus: Toy-sleep, metric: preserved, direction: greater, margin: -0.5}}
  - {{method: Toy, versus: Toy-sleep, metric: preserved, direction: greater}}
"""


def write(tmp_path, name, seeds="[0]", docs=12, device="cpu"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(docs=docs, seeds=seeds, device=device, out=tmp_path / name))
    return path, tmp_path / name


def test_run_with_seeds_prints_intervals_and_verdicts_and_report_rerenders(tmp_path):
    path, out = write(tmp_path, "one")
    ran = dpkit("run", path, "--seeds", "3", "--no-progress")
    assert ran.returncode == 0, ran.stderr
    assert " ± " in ran.stdout and "HOLDS" in ran.stdout and "UNDECIDED" in ran.stdout
    claims = json.loads((out / "claims.json").read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["holds", "undecided"]
    assert [p["seeds"] for p in claims[0]["points"]] == [[0, 1, 2], [0, 1, 2]]
    # the two share one noise stream: no spread, so every verdict says the sign decides
    assert "undecided — the paired differences do not vary between seeds" in ran.stdout
    assert all(c["power_note"].startswith("the paired differences do not vary between seeds at "
                                          "eta = 1, eta = 4, so the sign decides there")
               for c in claims)
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert {"preserved.mean", "preserved.sd", "preserved.ci_low", "preserved.ci_high",
            "preserved.n"} <= set(header)
    before = {n: (out / n).read_text() for n in ("results.csv", "claims.json")}
    for name in ("results.csv", "claims.json", "tradeoff.png", "cells.csv"):
        (out / name).unlink()
    again = dpkit("report", out)
    assert again.returncode == 0, again.stderr
    assert {n: (out / n).read_text() for n in before} == before
    assert (out / "tradeoff.png").stat().st_size > 0 and "HOLDS" in again.stdout


def test_runs_of_one_spec_merge_and_different_specs_are_refused(tmp_path):
    whole, whole_out = write(tmp_path, "whole", seeds="[0, 1, 2]")
    part_a, out_a = write(tmp_path, "a", seeds="[0, 1]")
    part_b, out_b = write(tmp_path, "b", seeds="[2]")
    assert dpkit("run", whole, "--no-progress").returncode == 0
    for out in (out_a, out_b):  # the parts draw with the whole run's noise secret
        out.mkdir()
        shutil.copy(whole_out / SECRET_FILE, out / SECRET_FILE)
    for path in (part_a, part_b):
        assert dpkit("run", path, "--no-progress").returncode == 0
    merged = tmp_path / "merged"
    result = dpkit("report", out_a, out_b, "--out", merged)
    assert result.returncode == 0, result.stderr
    assert "seeds [0, 1, 2]" in result.stdout
    assert (json.loads((merged / "claims.json").read_text())
            == json.loads((whole_out / "claims.json").read_text()))
    other, other_out = write(tmp_path, "other", docs=10)
    assert dpkit("run", other, "--no-progress").returncode == 0
    refused = dpkit("report", out_a, other_out, "--out", tmp_path / "x")
    assert refused.returncode == 2 and "different specs" in refused.stderr
    assert "data" in refused.stderr and not (tmp_path / "x").exists()


def test_report_of_a_folder_without_results(tmp_path):
    result = dpkit("report", tmp_path)
    assert result.returncode == 2 and "no results.jsonl" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a CPU-only machine")
def test_cuda_spec_validates_but_run_says_no_gpu(tmp_path):
    path, out = write(tmp_path, "gpu", device="cuda")
    assert dpkit("validate", path).returncode == 0
    ran = dpkit("run", path, "--no-progress")
    assert ran.returncode == 2 and "no CUDA GPU" in ran.stderr and not out.exists()
