"""Spec loading: every bad input is one SpecError line naming file and location."""

from __future__ import annotations

import pytest

from dpkit.base.errors import SpecError
from dpkit.spec import expand, grid, load_spec, set_path
from dpkit.contract.plugins import get_registry

GOOD = """
name: t
data: {name: toy_text}
model: {name: toy_space}
defense: {name: toy_noise, params: {eta: 1.0}, sweep: {eta: [1, 2]}}
seeds: [0, 1]
"""


def write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
    return p


def test_good_spec_expands_to_cells(tmp_path, toy_plugins):
    spec = load_spec(write(tmp_path, GOOD), registry=get_registry())
    cells = expand(spec, toy_plugins)
    assert len(cells) == 4
    assert {c.params["eta"] for c in cells} == {1, 2}
    assert len({c.key for c in cells}) == 4


def test_keys_are_stable_and_config_sensitive(tmp_path, toy_plugins):
    a = expand(load_spec(write(tmp_path, GOOD), registry=get_registry()), toy_plugins)
    b = expand(load_spec(write(tmp_path, GOOD, "t.yaml"), registry=get_registry()), toy_plugins)
    assert [c.key for c in a] == [c.key for c in b]
    c = expand(load_spec(write(tmp_path, GOOD.replace("[1, 2]", "[1, 3]"), "u.yaml"),
                         registry=get_registry()), toy_plugins)
    assert a[0].key == c[0].key and a[2].key != c[2].key


@pytest.mark.parametrize("text, location, fragment", [
    ("name: t\ndata: {name: toy_text\n", "line", "invalid YAML"),
    ("", "", "empty"),
    ("- a\n- b\n", "", "root must be a mapping"),
    ("!!python/object/apply:os.system ['echo pwned']\n", "line", "invalid YAML"),
    (GOOD + "colour: red\n", "colour", "unknown key"),
    (GOOD.replace("seeds: [0, 1]", "seeds: zero"), "seeds", "valid list"),
    (GOOD.replace("eta: 1.0}, sweep: {eta: [1, 2]}", "eta: -1.0}"), "defense.params.eta",
     "greater than 0"),
    (GOOD.replace("[1, 2]", "[1, -2]"), "defense.sweep.eta=-2", "greater than 0"),
    (GOOD.replace("toy_noise", "toy_nosie"), "defense.name", "did you mean 'toy_noise'"),
    (GOOD.replace("toy_text", "toytext"), "data.name", "did you mean"),
    (GOOD.replace("eta: 1.0}", "eat: 1.0}"), "defense.params.eat", "did you mean 'eta'"),
    (GOOD.replace("defense:", "mechanism:"), "mechanism.name", "unknown mechanism"),
    (GOOD.replace("device", "x") + "device: tpu\n", "device", "pattern"),
])
def test_bad_specs_give_one_line(tmp_path, toy_plugins, text, location, fragment):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path, registry=get_registry())
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    assert location in msg and fragment in msg
    assert "\n" not in msg


def test_unsafe_tag_never_executes(tmp_path, toy_plugins):
    marker = tmp_path / "pwned"
    path = write(tmp_path, f"!!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(SpecError):
        load_spec(path, registry=get_registry())
    assert not marker.exists()


def test_missing_file(tmp_path, toy_plugins):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "nope.yaml", registry=get_registry())


def test_include_merges_and_detects_cycles(tmp_path, toy_plugins):
    write(tmp_path, GOOD, "base.yaml")
    spec = load_spec(write(tmp_path, "include: base.yaml\nseeds: [5]\n", "child.yaml"), registry=get_registry())
    assert spec.seeds == [5] and spec.defense.name == "toy_noise"
    write(tmp_path, "include: b.yaml\n", "a.yaml")
    write(tmp_path, "include: a.yaml\n", "b.yaml")
    with pytest.raises(SpecError, match="cycle"):
        load_spec(tmp_path / "a.yaml", registry=get_registry())


def test_global_sweep_over_dotted_paths(tmp_path, toy_plugins):
    text = GOOD + "sweep: {data.params.n_docs: [4, 8]}\n"
    cells = expand(load_spec(write(tmp_path, text), registry=get_registry()), toy_plugins)
    assert len(cells) == 8
    assert {c.data["params"]["n_docs"] for c in cells} == {4, 8}


def test_grid_and_set_path():
    assert grid({}) == [{}]
    assert grid({"a": [1, 2], "b": [3]}) == [{"a": 1, "b": 3}, {"a": 2, "b": 3}]
    d = {"x": [{"y": 1}]}
    set_path(d, "x.0.y", 5)
    set_path(d, "z.w", 2)
    assert d == {"x": [{"y": 5}], "z": {"w": 2}}


@pytest.mark.parametrize("text, location, fragment", [
    # a base param that the method's sweep overrides is still checked
    (GOOD.replace("eta: 1.0}", "eta: not-a-number}"), "defense.params.eta", "valid number"),
    # a global sweep over data / model / attacks is checked for every point
    (GOOD + "sweep: {data.name: [toy_text, toytxt]}\n", "sweep.data.name='toytxt'",
     "unknown dataset"),
    (GOOD + "sweep: {data.params.n_docs: [4, -1]}\n", "sweep.data.params.n_docs=-1",
     "greater than or equal to 2"),
    (GOOD + "attacks: [{name: toy_attack}]\nsweep: {attacks.0.params.nope: [1]}\n",
     "sweep.attacks.0.params.nope=1", "unknown parameter 'nope'"),
    (GOOD + "sweep: {model.params.dim: [0]}\n", "sweep.model.params.dim=0", "greater than"),
    # a list index that is not there is a spec error, not an IndexError
    (GOOD + "attacks: [{name: toy_attack}]\nsweep: {attacks.7.params.ks: [1]}\n",
     "sweep.attacks.7.params.ks", "not an index in 0..0"),
    (GOOD + "sweep: {seeds.x: [1]}\n", "sweep.seeds.x", "not an index"),
    (GOOD.replace("sweep: {eta: [1, 2]}", "sweep: {eta.0: [1, 2]}"), "defense.sweep.eta.0=1",
     "valid number"),
])
def test_every_expanded_cell_is_checked(tmp_path, toy_plugins, text, location, fragment):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path, registry=get_registry())
    msg = str(info.value)
    assert msg.startswith(f"{path}: {location} — ") and fragment in msg, msg


def test_sweep_may_supply_a_required_param(tmp_path, toy_plugins):
    text = GOOD.replace("params: {eta: 1.0}, ", "")
    assert len(expand(load_spec(write(tmp_path, text), registry=get_registry()), toy_plugins)) == 4


def test_run_spec_checks_before_any_cell_runs(tmp_path, toy_plugins):
    from dpkit.runner import run_spec
    from dpkit.spec import parse_spec, read_yaml

    raw = read_yaml(write(tmp_path, GOOD))
    spec = parse_spec(raw, "s.yaml", registry=get_registry())
    bad = spec.model_copy(update={"sweep": {"data.params.n_docs": [4, -1]}})
    with pytest.raises(SpecError, match="sweep.data.params.n_docs=-1"):
        run_spec(bad, tmp_path / "out", show_progress=False, registry=get_registry())
    assert not (tmp_path / "out" / "results.jsonl").exists()


METHOD_SEEDS = GOOD + """baselines:
  - {name: toy_noise, label: once, params: {eta: 3.0}, seeds: [7]}
  - {name: toy_noise, label: three, params: {eta: 5.0}, seeds: [0, 1, 2]}
"""


def test_a_method_may_run_its_own_seeds(tmp_path, toy_plugins):
    cells = expand(load_spec(write(tmp_path, METHOD_SEEDS), registry=get_registry()), toy_plugins)
    seeds = {}
    for c in cells:
        seeds.setdefault(c.method, set()).add(c.seed)
    assert seeds == {"toy_noise": {0, 1}, "once": {7}, "three": {0, 1, 2}}


@pytest.mark.parametrize("bad, fragment", [("seeds: [7]", "seeds: [7, 7]"), ("seeds: [7]", "seeds: []")])
def test_method_seeds_are_validated(tmp_path, toy_plugins, bad, fragment):
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, METHOD_SEEDS.replace(bad, fragment)), registry=get_registry())
    assert "baselines.0.seeds" in str(info.value)


def test_seeds_flag_overrides_the_methods_seeds(tmp_path, toy_plugins, monkeypatch):
    from dpkit.cli import run as run_cli

    seen = {}

    def stop(spec, *args, **kwargs):
        seen["spec"] = spec
        raise SystemExit(0)

    monkeypatch.setattr("dpkit.runner.run_spec", stop)
    path = write(tmp_path, METHOD_SEEDS)
    args = type("Args", (), {"spec": str(path), "out": None, "fresh": False, "executor": "local",
                             "address": None, "retries": 0, "device": None, "seeds": 2,
                             "no_progress": True})()
    with pytest.raises(SystemExit):
        run_cli._run(args)
    cells = expand(seen["spec"], toy_plugins)
    assert {c.seed for c in cells} == {0, 1}
