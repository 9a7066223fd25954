"""``dpkit report`` on a copied run folder, with an empty cache and no network: whatever the report
says beyond the rows (the space's scale, the majority class) was written into the folder at run
time, and no dataset, model or artifact is loaded to re-render it."""

from __future__ import annotations

import shutil
import socket
from collections import Counter
from pathlib import Path

import pytest

import dpkit.base.cache
import dpkit.contract.context
import dpkit.contract.plugins
import dpkit.data.sources
from dpkit.cli.main import main
from dpkit.report.scale import median_nn_distance
from dpkit.testing.toy import ToySpace, ToyText

SPEC = """
name: offline
data: {{name: toy_text, params: {{n_docs: 41}}}}
model: {{name: toy_space}}
mechanism: {{name: laplace_dx, label: Laplace, params: {{eta: 1.0}}, sweep: {{eta: [1, 4]}}}}
attacks: [{{name: token_recovery, params: {{ks: [1, 5]}}}}]
evaluation: {{split: test, utility: classifier}}
seeds: [0, 1]
device: cpu
report: {{x: eta, utility: accuracy, privacy: recovery_at5}}
output: {out}
"""


@pytest.fixture
def mechanism_plugins(monkeypatch):
    """The toy data and space with the real token mechanisms, task and attacks."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "tasks,baselines,attacks")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy")
    dpkit.contract.plugins.reset()
    yield
    dpkit.contract.plugins.reset()


@pytest.fixture
def finished_run(tmp_path, monkeypatch, mechanism_plugins):
    """A finished run folder, written with a cache of its own."""
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path / "run-cache"))
    out = tmp_path / "run"
    spec = tmp_path / "offline.yaml"
    spec.write_text(SPEC.format(out=out))
    assert main(["run", str(spec), "--no-progress"]) == 0
    return out


@pytest.fixture
def attempts():
    """What the report tried and must not have (checked even where a caller swallows the error)."""
    tried: list[str] = []
    yield tried
    assert tried == [], f"dpkit report tried to {', '.join(tried)}"


def _forbid(monkeypatch, tried):
    """Fail on any fetch, any network connection and any dataset or model load."""
    def refuse(what):
        def fail(*args, **kwargs):
            tried.append(what)
            raise AssertionError(f"dpkit report tried to {what}")
        return fail

    monkeypatch.setattr(dpkit.data.sources, "fetch_artifact", refuse("fetch an artifact"))
    monkeypatch.setattr(dpkit.data.sources, "_local_or_download", refuse("download"))
    monkeypatch.setattr(socket.socket, "connect", refuse("open a connection"))
    monkeypatch.setattr(ToyText, "load", refuse("load the dataset"))
    monkeypatch.setattr(ToySpace, "load", refuse("load the model"))
    monkeypatch.setattr(dpkit.contract.context, "load_component", refuse("load a component"))
    dpkit.base.cache.clear_all()  # as in a fresh process: nothing loaded by the run is at hand
    monkeypatch.setenv("DPKIT_OFFLINE", "1")


@pytest.fixture
def offline(tmp_path, monkeypatch, attempts, capsys):
    """From here on: an empty cache, no network, no loading; returns report's printed output."""
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setenv("DPKIT_CACHE", str(empty))
    _forbid(monkeypatch, attempts)
    capsys.readouterr()

    def report(*folders: Path, out: Path | None = None) -> str:
        assert main(["report", *map(str, folders), *(["--out", str(out)] if out else [])]) == 0
        assert list(empty.iterdir()) == []  # nothing written into the cache either
        return capsys.readouterr().out
    return report


@pytest.fixture
def truth():
    """The majority share of the toy test labels and the toy space's scale, from the data."""
    labels = ToyText(ToyText.Params(n_docs=41)).load().splits["test"].labels
    return (Counter(labels).most_common(1)[0][1] / len(labels),
            median_nn_distance(ToySpace(ToySpace.Params()).load("cpu").vectors))


def test_report_of_a_copied_folder_needs_no_cache_and_no_network(finished_run, tmp_path, truth,
                                                                  offline):
    majority, scale = truth
    copy = tmp_path / "elsewhere" / "run"
    shutil.copytree(finished_run, copy)
    text = offline(copy)
    chance = next(line for line in text.splitlines() if line.startswith("| chance (reference)"))
    assert f" {majority:.4g} " in chance  # the majority share of the test labels, from the data
    assert f"nearest neighbour there: {scale:.3g}" in text
    assert "| no noise (reference)" in text


def test_a_folder_from_before_reference_json_still_renders_and_says_what_is_missing(
        finished_run, offline):
    (finished_run / "reference.json").unlink()
    text = offline(finished_run)
    assert "not recorded in this run folder" in text
    assert "| chance (reference)" not in text and "| no noise (reference)" in text
    assert not (finished_run / "reference.json").exists()  # report never invents one


def test_merged_folders_keep_their_reference(finished_run, tmp_path, offline):
    other = tmp_path / "other"
    shutil.copytree(finished_run, other)
    merged = tmp_path / "merged"
    assert "| chance (reference)" in offline(finished_run, other, out=merged)
    assert (merged / "reference.json").read_text() == (finished_run / "reference.json").read_text()


def test_the_offline_report_composes_each_dataset_as_the_run_fingerprinted_it(finished_run, offline):
    """The spec's total in ledger.json is the run's, keyed by the records the run hashed (recorded in
    reference.json), not by the dataset's name, though the report loads no dataset."""
    before = (finished_run / "ledger.json").read_text()
    assert "records:" in before and "not fingerprinted" not in before
    offline(finished_run)
    assert (finished_run / "ledger.json").read_text() == before
