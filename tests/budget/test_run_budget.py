"""``dpkit run`` and the budget store: recorded by default, refused before any cell over a cap."""

import json
import math

import pytest

from dpkit.budget.store import BudgetStore
from dpkit.cli.main import main
from dpkit.base.errors import BudgetExceededError
from dpkit.runner import run_spec
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry


def toy_dataset(store):
    (row,) = store.datasets()
    return row


def test_a_run_is_charged_to_its_dataset(toy_spec_text, toy_plugins, private_budget_store):
    path, out = toy_spec_text
    run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    store = BudgetStore(private_budget_store)
    row = toy_dataset(store)
    assert row["name"] == "toy_text" and row["cap_epsilon"] is None
    (run,) = store.runs(row["fingerprint"], "add_remove")
    assert run["state"] == "closed" and [c["state"] for c in run["charges"]] == ["spent"] * 3
    total = json.loads((out / "ledger.json").read_text())["total"]["groups"][0]
    assert total["fingerprint"] == row["fingerprint"] and total["cells"] == 3
    from dpkit.budget.status import dataset_status

    assert dataset_status(store, row)["composed"]["dp"]["epsilon"] == pytest.approx(
        total["release_every_cell"]["dp"]["epsilon"], rel=1e-12)


def test_a_second_run_over_the_cap_is_refused_before_any_cell(toy_spec_text, toy_plugins,
                                                              private_budget_store, tmp_path):
    path, out = toy_spec_text
    spec = load_spec(path, registry=get_registry())
    first = run_spec(spec, show_progress=False, registry=get_registry()).rows
    spent = math.fsum(r.privacy["epsilon"] for r in first)
    store = BudgetStore(private_budget_store)
    from dpkit.budget.fingerprint import DatasetId

    row = toy_dataset(store)
    dataset = DatasetId(row["name"], row["fingerprint"], row["basis"])
    store.set_cap(dataset, "add_remove", 1.5 * spent, 1e-5, force=True)
    other = tmp_path / "second"
    with pytest.raises(BudgetExceededError, match="nothing was run"):
        run_spec(spec, other, show_progress=False, registry=get_registry())
    assert not (other / "results.jsonl").exists()
    assert len(store.runs(row["fingerprint"], "add_remove")) == 1
    code = main(["run", str(path), "--out", str(other), "--no-progress"])
    assert code == 2 and not (other / "results.jsonl").exists()


def test_the_store_can_be_turned_off(toy_spec_text, toy_plugins, private_budget_store, monkeypatch):
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    path, _ = toy_spec_text
    run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert not private_budget_store.exists()


def test_budget_status_and_cap_on_the_command_line(toy_spec_text, toy_plugins, capsys):
    path, _ = toy_spec_text
    run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert main(["budget", "status", "toy_text"]) == 0
    text = capsys.readouterr().out
    assert "toy_text" in text and "(ε, δ)-DP: ε = " in text and "closed" in text
    assert main(["budget", "cap", "toy_text", "--epsilon", "1", "--delta", "1e-5"]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["budget", "cap", "toy_text", "--epsilon", "1", "--delta", "1e-5", "--force"]) == 0
    assert main(["budget", "status", "--json"]) == 0
    (status,) = json.loads(capsys.readouterr().out.splitlines()[-1])["datasets"]
    assert status["cap_epsilon"] == 1.0 and status["filter_epsilon"] > 1.0
    assert main(["budget", "close", "99"]) == 2
