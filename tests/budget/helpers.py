"""Specs and numbers the run-level budget tests share."""

from __future__ import annotations

from pathlib import Path

from dpkit.budget import chain
from dpkit.budget.filter import filter_epsilon_by_relation
from dpkit.budget.store import BudgetStore
from dpkit.data.records import record_hashes


def write_spec(folder: Path, name: str = "s", *, data: str = "{name: toy_text, params: {n_docs: 16}}",
               defense: str = "toy_noise", etas: str = "[0.01]", privacy: str = "",
               attacks: str = "[{name: toy_attack}]") -> Path:
    """A toy spec file in ``folder`` (its output under ``folder/out-NAME``)."""
    path = folder / f"{name}.yaml"
    path.write_text(f"""
name: {name}
data: {data}
model: {{name: toy_space}}
defense: {{name: {defense}, label: T, params: {{eta: 0.01}}, sweep: {{eta: {etas}}}}}
attacks: {attacks}
seeds: [0]
device: cpu
{privacy}
report: {{x: eta, utility: preserved, privacy: toy_top1}}
output: {folder / f"out-{name}"}
""")
    return path


def plan_pairs(path: Path) -> list:
    """(guarantee, count) of every planned spend of one run of the spec at ``path``."""
    from dpkit.accounting import guarantee_from_dict
    from dpkit.contract.plugins import get_registry
    from dpkit.runner.plan import plan_spec

    return [(guarantee_from_dict(s["guarantee"]), int(s["count"]))
            for p in plan_spec(str(path), get_registry()) for _ in p["seeds"] for s in p["spends"]]


def planned(path: Path) -> float:
    """The filter ε (add/remove, δ = 1e-5) of one run of the spec at ``path``, from its plan."""
    return filter_epsilon_by_relation({"add_remove": plan_pairs(path)}, 1e-5, "add_remove")


def spent(store: BudgetStore, name: str = "toy_text") -> dict:
    """The totals of the dataset reached under ``name`` (status's numbers)."""
    from dpkit.budget.status import dataset_status, find_datasets

    state = store.state()
    (row,) = find_datasets(state, name)
    return dataset_status(state, row)


def run_path(path, out=None, **kwargs):
    """Load and run the spec file at ``path`` with the built-in registry, progress off."""
    from dpkit.contract.plugins import get_registry
    from dpkit.runner import run_spec
    from dpkit.spec import load_spec

    registry = get_registry()
    return run_spec(load_spec(path, registry=registry), out, show_progress=False, registry=registry, **kwargs)


def docs(first: int, last: int) -> frozenset[str]:
    """The hashes of the test documents numbered ``first`` to ``last - 1`` (DATASET's are 0–49)."""
    return record_hashes(f"a test document number {i}" for i in range(first, last))


def log(store: BudgetStore) -> list[chain.Entry]:
    """Every entry of the store's log, in order."""
    with store.backend.transaction(write=False) as run:
        return chain.read_log(run, store.where)
