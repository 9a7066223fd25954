"""The ObfusLM specs: a training-budget axis whose two ends differ only in the budget, a stopping
rule on enough validation texts, and the paper's-scale row differing only in its calibration."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry

SPECS = Path(__file__).resolve().parents[3] / "specs"
NAMES = ("obfuslm.yaml", "obfuslm_budget.yaml", "paper/obfuslm.yaml")
BUDGET = {"max_train", "epochs"}


def methods(name: str) -> dict[str, dict]:
    spec = load_spec(SPECS / name, registry=get_registry())
    return {m.display: dict(m.params) for m in [spec.defense, *spec.baselines]}


@pytest.mark.parametrize("name", NAMES)
def test_every_cell_stops_on_enough_validation_texts_without_shrinking_its_budget(name):
    spec = load_spec(SPECS / name, registry=get_registry())
    split = spec.data.params["max_examples"]
    for label, params in methods(name).items():
        assert params["patience"] >= 3 and params["stop_on"] == "accuracy", label
        assert params["validation_size"] >= 400, label
        if params["max_train"] is not None:  # the fine-tuning texts are not cut for validation
            assert split >= params["max_train"] + params["validation_size"], label


def test_the_budget_axis_differs_only_in_the_budget():
    low, high = methods("obfuslm.yaml"), methods("obfuslm_budget.yaml")
    shared = {"data", "model", "attacks", "seeds"}
    assert load_spec(SPECS / "obfuslm.yaml", registry=get_registry()).model_dump(include=shared) == \
        load_spec(SPECS / "obfuslm_budget.yaml", registry=get_registry()).model_dump(include=shared)
    for label in ("ObfusLM", "Plaintext"):
        a, b = low[label], high[label]
        assert (a["max_train"], b["max_train"]) == (1200, 4800)
        assert {k: v for k, v in a.items() if k not in BUDGET} == \
            {k: v for k, v in b.items() if k not in BUDGET}
        assert a["validate_every"] == b["validate_every"]  # patience in texts, same at both ends


def test_papers_noise_scale_row_differs_only_in_its_calibration():
    rows = methods("obfuslm_budget.yaml")
    paper, exact = rows["ObfusLM (paper's noise scale)"], rows["ObfusLM"]
    assert paper.pop("calibration") == "faithful" and exact.get("calibration", "exact") == "exact"
    assert paper == exact


@pytest.mark.network
@pytest.mark.parametrize("name", NAMES)
def test_every_public_corpus_shares_no_record_with_the_private_data(name):
    """The runner refuses a server's public dataset that holds a private record (the Pang & Lee
    sentences hold Rotten Tomatoes snippets): each spec's attacker corpus must pass that check."""
    from dpkit.boundary.public import overlapping_records
    from dpkit.contract.plugins import get_registry

    registry = get_registry()
    spec = load_spec(SPECS / name, registry=registry)
    private = registry.build("dataset", spec.data.name, dict(spec.data.params)).load()
    corpora = [(p["public_dataset"], p["public_params"]) for p in methods(name).values()
               if p.get("public_dataset")]
    assert corpora, f"{name} names no attacker corpus"
    for dataset, params in corpora:
        public = registry.build("dataset", dataset, dict(params)).load()
        assert overlapping_records(private, public) == 0, (name, dataset, params)
