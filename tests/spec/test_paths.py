"""Relative file paths in a spec are read from the spec's folder; a whole-model error names its
field."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.base.errors import SpecError
from dpkit.spec import load_spec, read_yaml
from dpkit.spec.paths import is_path_param
from dpkit.contract.plugins import get_registry


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


BODY = "name: t\ndefense: {name: toy_noise}\nmodel: {name: toy_space, params: {dim: 8}}\n"


def test_relative_paths_resolve_against_the_spec_folder(tmp_path, monkeypatch):
    spec = write(tmp_path / "specs", "s.yaml",
                 BODY + "data: {name: toy_text, params: {path: corpus.csv, n_docs: 4}}\n"
                 "attacks: [{name: a, params: {vocab_file: ../v.txt, url_dir: 'https://x/y'}}]\n"
                 "output: runs/t\n")
    monkeypatch.chdir(tmp_path)
    raw = read_yaml(spec)
    assert raw["data"]["params"]["path"] == str(tmp_path / "specs" / "corpus.csv")
    assert raw["attacks"][0]["params"] == {"vocab_file": str(tmp_path / "v.txt"),
                                           "url_dir": "https://x/y"}
    assert raw["output"] == "runs/t"  # where the run writes: relative to where you run


def test_an_included_file_resolves_against_its_own_folder(tmp_path):
    write(tmp_path / "base", "data.yaml", "data: {name: toy_text, params: {path: c.csv}}\n")
    spec = write(tmp_path / "specs", "s.yaml", BODY + "include: ../base/data.yaml\n")
    assert read_yaml(spec)["data"]["params"]["path"] == str(tmp_path / "base" / "c.csv")


def test_cwd_keeps_the_older_reading(tmp_path):
    spec = write(tmp_path, "s.yaml", BODY + "data: {name: toy_text, params: {path: c.csv}}\n"
                 "paths_relative_to: cwd\n")
    assert read_yaml(spec)["data"]["params"]["path"] == "c.csv"


def test_path_params_by_name():
    assert all(map(is_path_param, ("path", "vocab_file", "cache_dir", "weights_path")))
    assert not any(map(is_path_param, ("paths", "profile", "max_examples")))


def test_a_missing_data_file_names_its_field(tmp_path, monkeypatch):
    import dpkit.contract.plugins

    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "datasets,models,tasks,baselines")
    dpkit.contract.plugins.reset()
    try:
        spec = write(tmp_path / "specs", "s.yaml",
                     "name: t\ndata: {name: local_files, params: {path: nope.csv}}\n"
                     "model: {name: glove-6b-50d}\n"
                     "mechanism: {name: laplace_dx, params: {eta: 10}}\n")
        with pytest.raises(SpecError) as err:
            load_spec(spec, registry=get_registry())
        assert err.value.location == "data.params.path"
        assert str(tmp_path / "specs" / "nope.csv") in err.value.message
        (tmp_path / "specs" / "nope.csv").write_text("text,label\nfine film,pos\nbad,neg\n")
        monkeypatch.chdir(tmp_path)  # another working directory: the same file
        assert load_spec(spec, registry=get_registry()).data.params["path"] == str(tmp_path / "specs" / "nope.csv")
    finally:
        dpkit.contract.plugins.reset()
