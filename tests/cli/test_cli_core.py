"""CLI: validate's one-line errors and exit codes, plugins listing, run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys


TOY_ENV = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}


def dpkit(*args, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "dpkit.cli.main", *map(str, args)], env=full_env,
                          cwd=cwd, capture_output=True, text=True, timeout=300)


BAD = {
    "syntax.yaml": "name: x\ndata: [1, 2\n",
    "empty.yaml": "",
    "list.yaml": "- 1\n",
    "unsafe.yaml": "!!python/object/apply:os.system ['echo hi']\n",
    "unknown_key.yaml": "name: x\ndata: {name: toy_text}\ndefense: {name: toy_noise}\nfoo: 1\n",
    "wrong_type.yaml": "name: x\ndata: {name: toy_text}\ndefense: {name: toy_noise}\nseeds: 3\n",
    "range.yaml": "name: x\ndata: {name: toy_text}\ndefense: {name: toy_noise, params: {eta: 0}}\n",
    "unknown_name.yaml": "name: x\ndata: {name: toy_text}\ndefense: {name: toy_nois}\n",
}


def test_validate_bad_specs(tmp_path):
    paths = []
    for name in sorted(BAD):
        paths.append(tmp_path / name)
        paths[-1].write_text(BAD[name])
    result = dpkit("validate", *paths, env=TOY_ENV, cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == len(paths), result.stderr  # exactly one line per bad file
    for path, line in zip(paths, lines):
        assert line.startswith(f"{path}: "), line
    assert "Traceback" not in result.stderr
    assert sorted(tmp_path.iterdir()) == sorted(paths)  # nothing written


def test_validate_missing_file(tmp_path):
    result = dpkit("validate", tmp_path / "nope.yaml", env=TOY_ENV)
    assert result.returncode == 2 and "no such file" in result.stderr


def test_run_prints_table_and_writes_outputs(tmp_path, toy_spec_text):
    path, out = toy_spec_text
    result = dpkit("run", path, "--no-progress", env=TOY_ENV)
    assert result.returncode == 0, result.stderr
    assert "preserved" in result.stdout and "| guarantee" in result.stdout
    assert "ε = " in result.stdout and "(ε, δ)-DP" in result.stdout
    wide = dpkit("run", path, "--no-progress", "--wide", env=TOY_ENV)
    assert wide.returncode == 0 and "ledger ε" in wide.stdout
    assert {p.name for p in out.iterdir()} >= {"results.jsonl", "results.csv", "ledger.json",
                                                "tradeoff.png"}


def test_plugins_json_lists_components_and_broken_plugins():
    env = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy,broken=no.such.mod"}
    result = dpkit("plugins", "--json", env=env)
    assert result.returncode == 0
    table = {p["name"]: p for p in json.loads(result.stdout)}
    assert table["toy"]["components"]["defense"] == ["toy_noise"]
    assert "No module named" in table["broken"]["errors"][0]
    text = dpkit("plugins", env=env)
    assert "BROKEN" in text.stdout and "toy_noise" in text.stdout


def test_bad_arguments_exit_2():
    result = dpkit("run")
    assert result.returncode == 2
    assert result.stderr.strip() == "dpkit run: error: the following arguments are required: spec"


def test_last_line_names_only_files_that_exist(tmp_path, toy_spec_text):
    path, out = toy_spec_text
    path.write_text(path.read_text().replace("eta: 1.0}", "eta: 1.0, fail: true}"))
    result = dpkit("run", path, "--no-progress", env=TOY_ENV)
    assert result.returncode == 1
    last = result.stdout.strip().splitlines()[-1]
    named = last.split("(")[-1].rstrip(")").split(", ")
    assert named == ["failures.jsonl"], last
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == set(named)
