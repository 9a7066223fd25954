"""Misspelt spec keys, evaluation settings and spec file names get a did-you-mean."""

from __future__ import annotations

import pytest

from dpkit.base.errors import SpecError
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry

GOOD = """
name: t
data: {name: toy_text}
model: {name: toy_space}
defense: {name: toy_noise, params: {eta: 1.0}}
seeds: [0]
privacy: {accountant: rdp}
"""


@pytest.mark.parametrize("good, bad, location, hint", [
    ("accountant:", "acountant:", "privacy.acountant", "did you mean 'accountant'?"),
    ("seeds:", "seed:", "seed", "did you mean 'seeds'?"),
    ("model:", "modle:", "modle", "did you mean 'model'?"),
])
def test_misspelt_key_names_the_right_one(tmp_path, toy_plugins, good, bad, location, hint):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace(good, bad))
    with pytest.raises(SpecError) as err:
        load_spec(path, registry=get_registry())
    assert err.value.location == location and hint in str(err.value)


def test_unknown_key_without_a_close_one_lists_the_known(tmp_path, toy_plugins):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD.replace("accountant: rdp", "zzzz: 1"))
    with pytest.raises(SpecError, match="known keys here: delta, accountant"):
        load_spec(path, registry=get_registry())


def test_misspelt_spec_file_names_the_closest(tmp_path, toy_plugins, monkeypatch):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "quick.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=r"no such file; did you mean specs/quick\.yaml\?"):
        load_spec("specs/quikc.yaml", registry=get_registry())
    with pytest.raises(SpecError, match=r"did you mean specs/quick\.yaml\?"):
        load_spec("quikc.yaml", registry=get_registry())
    with pytest.raises(SpecError, match="the specs that come with dpkit are in specs/"):
        load_spec("nothing-like-it.yaml", registry=get_registry())
