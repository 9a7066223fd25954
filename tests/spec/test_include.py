"""``include:``: a different component replaces the included one whole; ``null`` removes an
included key of the spec (``sweep: null``) but is a value inside a plug-in's params; everything
else still merges key by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.contract.plugins import get_registry
from dpkit.base.errors import SpecError
from dpkit.spec import deep_merge, expand, load_spec, read_yaml

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name: base
data: {name: toy_text, params: {n_docs: 12, seed: 3}}
model: {name: toy_space, params: {dim: 4}}
defense: {name: toy_noise, label: Noisy, params: {eta: 1.0, sleep: 0.0}, sweep: {eta: [1, 2, 4]}}
seeds: [0, 1]
privacy: {delta: 1.0e-6, accountant: pld}
report: {x: eta, utility: preserved, privacy: toy_top1}
sweep: {data.params.n_docs: [8, 12]}
"""


def child(tmp_path, text: str) -> Path:
    (tmp_path / "base.yaml").write_text(BASE)
    path = tmp_path / "child.yaml"
    path.write_text("include: base.yaml\n" + text)
    return path


def test_sweep_null_drops_the_included_sweeps(tmp_path, toy_plugins):
    spec = load_spec(child(tmp_path, "defense: {sweep: null}\nsweep: null\n"), registry=get_registry())
    assert spec.defense.sweep == {} and spec.sweep == {}
    assert spec.defense.label == "Noisy" and spec.defense.params == {"eta": 1.0, "sleep": 0.0}
    assert len(expand(spec, toy_plugins)) == 2  # one point, two seeds


def test_a_standalone_sweep_null_means_no_sweep(tmp_path, toy_plugins):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.replace("sweep: {eta: [1, 2, 4]}", "sweep: null")
                    .replace("sweep: {data.params.n_docs: [8, 12]}", "sweep: null"))
    assert len(expand(load_spec(path, registry=get_registry()), toy_plugins)) == 2


def test_a_different_component_replaces_the_included_one_whole():
    base = {"mechanism": {"name": "laplace_dx", "label": "dχ", "params": {"eta": 10},
                          "sweep": {"eta": [5, 10]}, "seeds": [0, 1, 2]}}
    merged = deep_merge(base, {"mechanism": {"name": "ku_rr", "params": {"epsilon": 1.0}}})
    assert merged["mechanism"] == {"name": "ku_rr", "params": {"epsilon": 1.0}}


def test_the_issue_case_validates_against_the_real_registry(tmp_path):
    """quick.yaml's mechanism (laplace_dx, η swept) replaced by a mechanism without η."""
    path = tmp_path / "rr.yaml"
    path.write_text(f"include: {ROOT / 'specs' / 'quick.yaml'}\nname: quick-rr\n"
                    "mechanism: {name: santext_plus, params: {epsilon: 2}}\nclaims: null\n"
                    "baselines: null\n")
    spec = load_spec(path, registry=get_registry())
    assert spec.mechanism.params == {"epsilon": 2} and spec.mechanism.sweep == {}
    assert spec.baselines == [] and spec.claims == [] and spec.name == "quick-rr"


def test_the_same_component_still_merges_its_params_and_keeps_its_sweep(tmp_path, toy_plugins):
    spec = load_spec(child(tmp_path, "defense: {name: toy_noise, params: {sleep: 0.01}}\n"
                                     "privacy: {delta: 1.0e-7}\ndata: {params: {seed: 5}}\n"), registry=get_registry())
    assert spec.defense.params == {"eta": 1.0, "sleep": 0.01}
    assert spec.defense.sweep == {"eta": [1, 2, 4]} and spec.defense.label == "Noisy"
    assert (spec.privacy.delta, spec.privacy.accountant) == (1e-7, "pld")
    assert spec.data.params == {"n_docs": 12, "seed": 5}


def test_the_specs_own_name_is_not_a_component(tmp_path, toy_plugins):
    """The root mapping has a ``name`` too; renaming the spec must not drop what it includes."""
    spec = load_spec(child(tmp_path, "name: renamed\n"), registry=get_registry())
    assert spec.name == "renamed" and spec.defense.sweep == {"eta": [1, 2, 4]}
    assert spec.model.params == {"dim": 4}


def test_null_inside_plugin_params_is_a_value_not_a_removal(tmp_path):
    base = {"data": {"name": "rotten_tomatoes", "params": {"max_examples": 2000, "seed": 0}},
            "defense": {"name": "snd", "params": {"denoiser": {"d_model": 128, "n_layers": 2}}},
            "evaluation": {"max_docs": 400}}
    merged = deep_merge(base, {"data": {"params": {"max_examples": None}},
                               "defense": {"params": {"denoiser": {"d_model": None}}},
                               "evaluation": {"max_docs": None}})
    assert merged["data"]["params"] == {"max_examples": None, "seed": 0}
    assert merged["defense"]["params"]["denoiser"] == {"d_model": None, "n_layers": 2}
    assert merged["evaluation"] == {"max_docs": None}


def test_a_component_inside_params_is_replaced_by_another():
    base = {"defense": {"name": "snd", "params": {"denoiser": {
        "public": {"name": "news_articles", "params": {"seed": 0, "max_examples": 10}}}}}}
    merged = deep_merge(base, {"defense": {"params": {"denoiser": {
        "public": {"name": "movie_polarity"}}}}})
    assert merged["defense"]["params"]["denoiser"]["public"] == {"name": "movie_polarity"}


def test_null_removes_through_a_chain_of_includes(tmp_path, toy_plugins):
    (tmp_path / "middle.yaml").write_text("include: base.yaml\nseeds: [0, 1, 2]\n")
    child(tmp_path, "")
    top = tmp_path / "top.yaml"
    top.write_text("include: middle.yaml\nmodel: null\nreport: {privacy: null}\n"
                   "defense: {sweep: null}\n")
    raw = read_yaml(top)
    assert "model" not in raw and raw["report"] == {"x": "eta", "utility": "preserved"}
    assert raw["seeds"] == [0, 1, 2] and "sweep" not in raw["defense"]
    assert raw["defense"]["params"] == {"eta": 1.0, "sleep": 0.0}


def test_nulling_the_specs_name_is_a_clear_error(tmp_path, toy_plugins):
    with pytest.raises(SpecError, match="name"):
        load_spec(child(tmp_path, "name: null\n"), registry=get_registry())


@pytest.mark.parametrize("name", ["snd", "hiddenecho", "obfuslm", "dped"])
def test_paper_variants_keep_their_explicit_nulls(name):
    raw = read_yaml(ROOT / "specs" / "paper" / f"{name}.yaml")
    included = read_yaml(ROOT / "specs" / f"{name}.yaml")
    assert raw["name"] == f"{name}-paper" and raw["claims"]
    if "max_examples" in included["data"]["params"]:
        assert raw["data"]["params"]["max_examples"] is None  # all examples, as the file says
