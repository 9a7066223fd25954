"""A dataset reached under three names and two relations, and a run killed at every step of a
cell, never spend past the cap — and never less than what crossed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit.base.errors import BudgetExceededError
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore
from dpkit.testing.toy import ToyText

sys.path.insert(0, os.path.dirname(__file__))
from conftest import PLUGINS  # noqa: E402
from helpers import planned, run_path, spent, write_spec  # noqa: E402

WORKER = str(Path(__file__).parent / "store_worker.py")


def test_three_names_and_two_relations_share_one_cap(tmp_path, budget_plugins,
                                                     private_budget_store):
    docs = ToyText(ToyText.Params(n_docs=16)).load()
    rows = tmp_path / "toy.jsonl"
    rows.write_text("".join(json.dumps({"text": t}) + "\n" for s in docs.splits.values()
                            for t in s.texts))
    names = ["{name: toy_text, params: {n_docs: 16}}", "{name: toy_text_alias, params: {n_docs: 16}}",
             "{name: local_files, params: {path: %s}}" % rows]
    store = BudgetStore(private_budget_store)
    # room for a first round of all six (a replace-one run costs more than an add/remove one: its
    # Gaussian is charged at the replacement's sensitivity), not for three rounds
    cap = 6.0 * planned(write_spec(tmp_path, "probe"))
    store.set_cap(DatasetIds(budget_plugins)({"name": "toy_text", "params": {"n_docs": 16}}),
                  "replace_one", epsilon=cap, delta=1e-5)
    outcomes = []
    for round_ in range(3):
        for i, data in enumerate(names):
            for relation in ("add_remove", "replace_one"):
                spec = write_spec(tmp_path, f"r{round_}n{i}{relation}", data=data,
                                  privacy=f"privacy: {{neighboring: {relation}}}")
                try:
                    run_path(spec)
                    outcomes.append("ran")
                except BudgetExceededError:
                    outcomes.append("refused")
    status = spent(store)
    assert set(status["names"]) == {"toy_text", "toy_text_alias", "local_files:toy.jsonl"}
    assert "ran" in outcomes and outcomes[-1] == "refused"
    assert status["totals"]["epsilon"] <= cap * (1 + 1e-9)
    assert len(status["composed"]) == 2  # charges in both relations, one cap


def run_worker(spec, out, step, mark, store):
    env = {**os.environ, "DPKIT_BUDGET_STORE": str(store), "DPKIT_LOAD_PLUGINS": "",
           "DPKIT_EXTRA_PLUGINS": PLUGINS, "PYTHONPATH": os.path.dirname(__file__)}
    proc = subprocess.run([sys.executable, WORKER, "step", str(spec), str(out), str(step),
                           str(mark)], env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout.split()


@pytest.mark.parametrize("step", range(1, 11))
def test_kill_9_at_every_step_of_a_cell(tmp_path, budget_plugins, private_budget_store, step):
    """Steps of a one-cell run: each store write (killed inside its transaction and just after it
    commits) — dataset, reservation, the declaration's charge, the cell's end, the settlement —
    and the return of the wire's send. After the kill the next run into the folder settles the
    dead one: the cap holds, and a release that crossed stays charged."""
    spec = write_spec(tmp_path, "cell")
    one = planned(spec)
    store = BudgetStore(private_budget_store)
    store.set_cap(DatasetIds(budget_plugins)({"name": "toy_text", "params": {"n_docs": 16}}),
                  epsilon=1.1 * one, delta=1e-5)  # one run fits, two do not
    mark = tmp_path / "crossed"
    code, said = run_worker(spec, tmp_path / "out-cell", step, mark, private_budget_store)
    assert code == -9 or said[0] == "done", (code, said)
    store.verify()
    crossed = mark.exists()
    try:  # the next run into the same folder settles the dead run first
        run_path(spec)
    except BudgetExceededError:
        pass
    state = store.state()
    assert all(r.state != "open" for r in state.runs.values())  # nothing left dangling
    status = spent(store)
    assert status["totals"]["epsilon"] <= 1.1 * one * (1 + 1e-9)
    if crossed:  # what crossed is charged: a whole run's ε at least
        assert status["totals"]["epsilon"] >= one * (1 - 1e-9)
        first = state.runs[min(state.runs)]
        assert first.state == "closed" and any(c.charges for c in first.cells.values())
