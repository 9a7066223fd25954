"""What acts on its own is said where a newcomer looks: `dpkit data list` names the cache and the
budget store, the first run that creates the budget store says so and how to turn it off, every
run that records spends says where, and the README names every place dpkit writes outside the
project and every variable that moves it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpkit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = """
name: first
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise, sweep: {{eta: [1, 2]}}}}
device: cpu
output: {out}
"""


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "first.yaml"
    path.write_text(SPEC.format(out=tmp_path / "out"))
    return path


def test_data_list_names_the_cache_and_the_budget_store(tmp_path, monkeypatch, capsys,
                                                        toy_plugins):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DPKIT_BUDGET_STORE", str(tmp_path / "b" / "store.sqlite"))
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {tmp_path / 'cache'} (empty so far" in out and "DPKIT_CACHE=DIR moves it" in out
    assert f"budget store: {tmp_path / 'b' / 'store.sqlite'} — every `dpkit run` records" in out
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "blob").write_bytes(b"x" * 3_000_000)
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "(3 MB of downloads" in out and "budget store: off (DPKIT_BUDGET_STORE=off)" in out


def test_the_run_that_creates_the_budget_store_says_so_once(spec, tmp_path, monkeypatch, capsys,
                                                            toy_plugins):
    store = tmp_path / "budget" / "store.sqlite"
    monkeypatch.setenv("DPKIT_BUDGET_STORE", str(store))
    assert main(["run", str(spec), "--no-progress"]) == 0
    first = capsys.readouterr()
    assert store.is_file()
    assert f"recording this run's privacy spends in the budget store {store}" in first.err
    assert "DPKIT_BUDGET_STORE=off" in first.err and "dpkit budget status" in first.err
    assert f"privacy spends of the 2 cells run now recorded in the budget store {store}" \
        in first.out
    assert main(["run", str(spec), "--no-progress", "--fresh"]) == 0
    again = capsys.readouterr()
    assert "recording this run's privacy spends" not in again.err  # once: the store exists now
    assert f"recorded in the budget store {store}" in again.out
    assert main(["run", str(spec), "--no-progress"]) == 0  # everything resumed: nothing recorded
    assert "recorded in the budget store" not in capsys.readouterr().out


def test_with_the_store_off_nothing_is_recorded_or_said(spec, tmp_path, monkeypatch, capsys,
                                                        toy_plugins):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    assert main(["run", str(spec), "--no-progress"]) == 0
    seen = capsys.readouterr()
    assert "budget store" not in seen.out + seen.err
    assert not (tmp_path / "cache" / "budget").exists()


def test_the_readme_names_every_place_and_variable_dpkit_writes_with():
    """Every ``DPKIT_*`` variable the code reads and every folder it makes under the cache root."""
    code = "\n".join(p.read_text(encoding="utf-8") for folder in ("dpkit", "plugins")
                     for p in (ROOT / folder).rglob("*.py"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    variables = set(re.findall(r"\bDPKIT_[A-Z_]+\b", code))
    folders = set(re.findall(r"cache_root\(\)\)?\s*/\s*\"(\w+)\"", code))
    folders |= set(re.findall(r"\(root\s*/\s*\"(\w+)\"\)", code))  # (root or cache_root()) / …
    assert {"DPKIT_CACHE", "DPKIT_BUDGET_STORE"} <= variables and "downloads" in folders
    assert not [v for v in variables if v not in readme], "README misses variables"
    assert not [f for f in folders if f"`{f}/`" not in readme], "README misses cache folders"
    assert "dpkit new plugin" in readme and "~/.cache/dpkit" in readme


def test_a_run_whose_cells_all_failed_claims_no_recorded_spends(spec, tmp_path, monkeypatch,
                                                                capsys, toy_plugins):
    monkeypatch.setenv("DPKIT_BUDGET_STORE", str(tmp_path / "store.sqlite"))
    spec.write_text(spec.read_text().replace("{name: toy_noise,", "{name: toy_noise, "
                                             "params: {fail: true},"))
    assert main(["run", str(spec), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "recorded in the budget store" not in out
    assert out.strip().splitlines()[-1].endswith("(failures.jsonl)")  # the file list stays last
