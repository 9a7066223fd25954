"""Ways around a cap that issue 42 did not list, each kept as a test: another embedding space for
metric DP, a notion the cap does not govern, a quiet raise or lift, a close from another host, a
refused --fresh wiping results, and a run that refuses after the cap was spent before it was set."""

import os
import sys

import pytest

from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore
from dpkit.cli.main import main

sys.path.insert(0, os.path.dirname(__file__))
from helpers import planned, run_path, spent, write_spec  # noqa: E402

TOY = {"name": "toy_text", "params": {"n_docs": 16}}


def metric_spec(tmp_path, name, space, eta=5.0):
    path = write_spec(tmp_path, name, defense="toy_metric", attacks="[]")
    return path.write_text(path.read_text().replace(
        "params: {eta: 0.01}", f"params: {{eta: {eta}, space: {space}}}").replace(
        "sweep: {eta: [0.01]}", f"sweep: {{eta: [{eta}]}}")) and path


def test_a_metric_dp_spend_needs_an_eta_cap_and_another_space_does_not_reset_it(
        tmp_path, budget_plugins, private_budget_store, capsys):
    store = BudgetStore(private_budget_store)
    dataset = DatasetIds(budget_plugins)(TOY)
    store.set_cap(dataset, epsilon=5.0, delta=1e-5)
    with pytest.raises(BudgetExceededError, match="--eta"):  # ε-only cap: dχ cannot be counted
        run_path(metric_spec(tmp_path, "a", "glove"))
    assert main(["budget", "cap", "toy_text", "--eta", "12"]) == 0
    said = capsys.readouterr().out
    assert "metric DP (dχ): η = 12 per token" in said and "(ε, δ)-DP: ε = 5" in said
    run_path(metric_spec(tmp_path, "b", "glove"))  # η 5
    run_path(metric_spec(tmp_path, "c", "fasttext"))  # η 10
    with pytest.raises(BudgetExceededError, match=r"η per token = 12.*bring it to 15"):
        run_path(metric_spec(tmp_path, "d", "word2vec"))
    assert spent(store)["totals"]["eta"] == 10.0


def test_raising_or_lifting_a_cap_is_an_explicit_recorded_act(tmp_path, budget_plugins,
                                                              private_budget_store, capsys):
    store = BudgetStore(private_budget_store)
    first = write_spec(tmp_path, "first")
    dataset = DatasetIds(budget_plugins)(TOY)
    store.set_cap(dataset, epsilon=1.1 * planned(first), delta=1e-5)
    run_path(first)
    for quiet in (["--epsilon", "100", "--delta", "1e-5"],  # a bigger ε
                  ["--epsilon", "1", "--delta", "0.5"],  # a smaller ε but a bigger δ
                  ["--epsilon", "1", "--delta", "1e-5", "--neighboring", "replace_one"]):
        assert main(["budget", "cap", "toy_text", *quiet]) == 2
        assert "--raise" in capsys.readouterr().err
    assert main(["budget", "cap", "toy_text", "--epsilon", "100", "--delta", "1e-5",
                 "--raise"]) == 2
    assert "--reason" in capsys.readouterr().err
    assert main(["budget", "cap", "toy_text", "--epsilon", "1", "--delta", "1e-5"]) == 0
    assert "already spent" in capsys.readouterr().out  # lowered below what was spent: warned
    with pytest.raises(BudgetExceededError):
        run_path(write_spec(tmp_path, "second"))
    assert main(["budget", "lift", "toy_text", "--reason", "the study ended"]) == 0
    run_path(write_spec(tmp_path, "third"))
    assert main(["budget", "status", "toy_text"]) == 0
    out = capsys.readouterr().out
    assert "cap lower at" in out and "cap lift at" in out and "the study ended" in out


def test_close_refuses_a_run_of_another_host(private_budget_store, monkeypatch):
    from store_worker import plans, spends

    from dpkit.runner.budget import run_liveness

    store = BudgetStore(private_budget_store)
    run_id = store.reserve(plans(a=spends(1.0)), "w", "/somewhere")
    monkeypatch.setattr("socket.gethostname", lambda: "another-host")
    with pytest.raises(BudgetStoreError, match="ran on host"):
        store.close(run_id, run_liveness)
    assert store.state().runs[run_id].state == "open"


def test_a_refused_fresh_run_keeps_the_results_it_would_have_cleared(
        tmp_path, budget_plugins, private_budget_store):
    store = BudgetStore(private_budget_store)
    spec = write_spec(tmp_path, "s")
    store.set_cap(DatasetIds(budget_plugins)(TOY), epsilon=1.1 * planned(spec), delta=1e-5)
    run_path(spec)
    results = (tmp_path / "out-s" / "results.jsonl").read_text()
    with pytest.raises(BudgetExceededError):
        run_path(spec, fresh=True)
    assert (tmp_path / "out-s" / "results.jsonl").read_text() == results


def test_k_anonymity_spends_count_against_their_own_cap(private_budget_store):
    from store_worker import DATASET, plans

    from dpkit.accounting import KAnonymityGuarantee, guarantee_to_dict

    def anonymity(eps):
        return [{"label": "weights", "count": 2, "guarantee": guarantee_to_dict(
            KAnonymityGuarantee(k_requested=5, k_achieved=5, share_below_k=0.0, epsilon=eps))}]

    store = BudgetStore(private_budget_store)
    store.set_cap(DATASET, epsilon=1.0, delta=1e-5)
    with pytest.raises(BudgetExceededError, match="--anonymity-epsilon"):
        store.reserve(plans(a=anonymity(0.5)), "w", "/a")
    said = store.set_cap(DATASET, anonymity_epsilon=2.5)
    assert any("(k, ε)-anonymity: ε = 2.5" in line for line in said["governs"])
    store.reserve(plans(a=anonymity(0.5)), "w", "/a")  # 2 × 0.5
    with pytest.raises(BudgetExceededError, match=r"\(k, ε\) ε = 2.5.*bring it to 3"):
        store.reserve(plans(b=anonymity(1.0)), "w", "/b")  # + 2 × 1.0
