"""``dpkit.testing.small_specs``: what a shrink replaces, and what it keeps."""

from __future__ import annotations

from dpkit.testing.small_specs import Shrink, kept_sweep, merged, shrink_spec

RAW = {
    "name": "s", "data": {"name": "big", "params": {"n": 10**6}}, "model": {"name": "huge"},
    "defense": {"name": "d", "label": "D", "params": {"epochs": 100, "queries": 300,
                                                     "public": {"name": "news", "seed": 3},
                                                     "public_params": {"variant": "long"}},
                "sweep": {"eps": [1, 8, 64], "queries": [300, 3000]}, "seeds": [0]},
    "baselines": [{"name": "b", "label": "B", "params": {"queries": 3000},
                   "sweep": {"eps": [0.5, 2]}}],
    "attacks": [{"name": "a", "params": {"steps": 200, "metric": "cosine"}}],
    "privacy": {"delta": 1e-5, "common_noise": True},
    "claims": [{"name": "c", "method": "D", "versus": "B", "metric": "m", "over": "queries",
                "points": [3000], "where": {"queries": 300, "eps": 8}}],
    "seeds": [0, 1, 2, 3, 4], "device": "auto", "output": "runs/s",
}
SHRINK = Shrink(data={"name": "tiny"}, params={"d": {"epochs": 1, "public": {"name": "gen"},
                                                     "public_params": {"n": 4}}},
                attacks={"a": {"steps": 2}}, keep={"eps": [1, 8]},
                rename={"queries": {300: 10, 3000: 20}})


def test_a_shrink_replaces_data_params_and_seeds_and_keeps_the_rest():
    small = shrink_spec(RAW, SHRINK)
    assert small["data"] == {"name": "tiny"} and small["model"] == RAW["model"]  # no model given
    d, b = small["defense"], small["baselines"][0]
    assert d["params"]["epochs"] == 1 and d["params"]["public"] == {"name": "gen", "seed": 3}
    assert d["params"]["public_params"] == {"n": 4}  # a component's params are replaced whole
    assert d["sweep"] == {"eps": [1, 8], "queries": [10, 20]} and "seeds" not in d
    assert d["params"]["queries"] == 10 and b["params"]["queries"] == 20
    assert b["sweep"] == {"eps": [0.5]}  # none of the kept values: its first, still one cell
    assert small["attacks"] == [{"name": "a", "params": {"steps": 2, "metric": "cosine"}}]
    (claim,) = small["claims"]
    assert claim["points"] == [20] and claim["where"] == {"queries": 10, "eps": 8}
    assert small["privacy"] == RAW["privacy"] and small["seeds"] == [0, 1]
    assert small["device"] == "cpu" and "output" not in small
    assert RAW["defense"]["params"]["epochs"] == 100  # the spec itself is left as it was


def test_merged_keeps_what_the_override_does_not_name():
    assert merged({"a": {"x": 1, "y": 2}, "b": 3}, {"a": {"y": 5}}) == {"a": {"x": 1, "y": 5}, "b": 3}
    assert kept_sweep({"k": [5, 10, 20]}, {"k": [20, 10]}) == {"k": [10, 20]}  # the spec's order
