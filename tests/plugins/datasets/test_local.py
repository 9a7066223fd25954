"""Local-file datasets: CSV, JSON Lines, Parquet; validation errors name the file; a spec runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import dpkit
from dpkit.base.errors import ParamsError
from dpkit.contract.registry import validate_params
from dpkit_datasets.local import LocalFiles

ROWS = [{"text": f"w{i % 40} w{(3 * i) % 40} w{(7 * i) % 40}", "label": "ab"[i % 2],
         "split": "test" if i % 4 == 0 else "train"} for i in range(24)]


def load(**params):
    return LocalFiles(validate_params(LocalFiles, params)).load()


def test_csv_with_label_and_split_columns(tmp_path):
    path = tmp_path / "corpus.csv"
    pd.DataFrame(ROWS).to_csv(path, index=False)
    data = load(path=str(path), label_column="label", split_column="split")
    assert set(data.splits) == {"train", "test"} and len(data["test"]) == 6
    assert data.label_names == ("a", "b")
    assert data["train"].texts[0] == ROWS[1]["text"] and data["train"].labels[0] == 1


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_jsonl_and_parquet_get_a_seeded_split(tmp_path, suffix):
    path = tmp_path / f"corpus{suffix}"
    frame = pd.DataFrame(ROWS).drop(columns="split")
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    else:
        frame.to_parquet(path)
    data = load(path=str(path), label_column="label", test_fraction=0.25, seed=1)
    assert len(data["train"]) == 18 and len(data["test"]) == 6
    assert sorted(data["train"].texts + data["test"].texts) == sorted(r["text"] for r in ROWS)
    assert load(path=str(path), test_fraction=0.25, seed=1)["test"].labels is None


@pytest.mark.parametrize(("content", "params", "message"), [
    (None, {}, "does not exist"),
    (b"", {}, "is empty"),
    (b"text,label\n", {}, "has no rows"),
    (b"body,label\nhello,a\n", {}, "has no column 'text' \\(text_column\\); its columns: body, label"),
    (b"text,label\nhello,a\n", {"split_column": "part"}, "has no column 'part'"),
    ("text\ncaf\u00e9\n".encode("latin-1"), {}, "is not valid utf-8.*latin-1"),
])
def test_bad_files_are_refused_naming_the_file(tmp_path, content, params, message):
    path = tmp_path / "bad.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ParamsError, match=f"bad.csv.*{message}|{message}.*bad.csv"):
        validate_params(LocalFiles, {"path": str(path), **params})


def test_latin1_reads_with_its_encoding(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("text\ncaf\u00e9 au lait\nthé\n".encode("latin-1"))
    assert load(path=str(path), encoding="latin-1", test_fraction=0.5)["test"].texts[0] in (
        "caf\u00e9 au lait", "thé")


def test_split_column_needs_train_and_test(tmp_path):
    path = tmp_path / "dev.csv"
    pd.DataFrame([{"text": "a", "split": "train"}, {"text": "b", "split": "dev"}]).to_csv(
        path, index=False)
    with pytest.raises(dpkit.base.errors.DataSourceError, match="dev.csv.*'train' and 'test'"):
        load(path=str(path), split_column="split")


def test_datasets_folder_without_the_library_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "dataset_dict.json").write_text("{}")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "datasets" else real(name, *a))
    with pytest.raises(ParamsError, match="saved.*pip install datasets"):
        validate_params(LocalFiles, {"path": str(tmp_path / "saved")})


def test_a_datasets_folder_reads_its_splits(tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"text": ["a b", "c d", "e"], "label": ["x", "y", "x"]}),
        "test": datasets.Dataset.from_dict({"text": ["f g"], "label": ["y"]})})
    saved.save_to_disk(str(tmp_path / "saved"))
    data = load(path=str(tmp_path / "saved"), label_column="label")
    assert data["train"].texts == ["a b", "c d", "e"] and data["test"].labels == [1]
    with pytest.raises(ParamsError, match="saved has no column 'body'"):
        validate_params(LocalFiles, {"path": str(tmp_path / "saved"), "text_column": "body"})


@pytest.fixture
def local_and_toy(monkeypatch):
    """The built-in datasets (which hold local_files) plus the toy plug-in."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "datasets")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy")
    dpkit.contract.plugins.reset()
    yield
    dpkit.contract.plugins.reset()


def test_a_spec_runs_on_a_local_csv(tmp_path, local_and_toy, capsys):
    from dpkit.cli.main import main

    csv_path = tmp_path / "mine.csv"
    pd.DataFrame(ROWS).to_csv(csv_path, index=False)
    spec = tmp_path / "mine.yaml"
    spec.write_text(f"""
name: mine
data: {{name: local_files, params: {{path: {csv_path}, label_column: label, split_column: split}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, params: {{eta: 2.0}}}}
attacks: [{{name: toy_attack}}]
seeds: [0]
device: cpu
output: {tmp_path / "out"}
""")
    assert main(["run", str(spec)]) == 0
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[0])
    assert 0 < row["privacy"]["epsilon"] < float("inf") and "toy_top1" in row["metrics"]
    assert row["ledger"]["spends"][0]["count"] > 0  # the local test split's tokens
    spec.write_text(spec.read_text().replace("mine.csv", "missing.csv"))
    capsys.readouterr()
    assert main(["validate", str(spec)]) == 2
    assert "missing.csv does not exist" in capsys.readouterr().err
