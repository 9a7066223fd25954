"""A dataset is its records: copies, renames, links, encodings and formats of the same rows share
one fingerprint; subsets and catalogue aliases are linked by their stored overlap (ways 4 and 5)."""

import json
import os
import sys

import pytest

from dpkit.base.errors import BudgetExceededError
from dpkit.budget.fingerprint import DatasetIds
from dpkit.budget.store import BudgetStore
from dpkit.contract.context import clear_loaded
from dpkit.contract.plugins import get_registry

sys.path.insert(0, os.path.dirname(__file__))
from helpers import planned, run_path, spent, write_spec  # noqa: E402

ROWS = [(f"w{i} w{(i * 7) % 40} w{(i * 3) % 40} w{i % 5}", "ab"[i % 2]) for i in range(30)]


def write_copies(folder):
    """The same rows as a CSV and as every other form a user could make of it."""
    csv = folder / "corpus.csv"
    csv.write_text("text,label\n" + "".join(f"{t},{lab}\n" for t, lab in ROWS))
    forms = {"csv": csv}
    forms["renamed"] = folder / "other-name.csv"
    forms["renamed"].write_bytes(csv.read_bytes())
    forms["hard link"] = folder / "linked.csv"
    os.link(csv, forms["hard link"])
    forms["crlf"] = folder / "crlf.csv"
    forms["crlf"].write_bytes(csv.read_bytes().replace(b"\n", b"\r\n"))
    forms["jsonl"] = folder / "rows.jsonl"
    forms["jsonl"].write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in ROWS))
    forms["latin-1"] = folder / "latin.csv"
    forms["latin-1"].write_bytes(csv.read_text().encode("latin-1"))
    forms["recased, respaced"] = folder / "loud.csv"  # one of my own: shouting does not hide anyone
    forms["recased, respaced"].write_text("text,label\n" + "".join(
        f"\"  {t.upper().replace(' ', '   ')} \",{lab}\n" for t, lab in ROWS))
    forms["relabelled"] = folder / "relabelled.csv"  # a label is not a person
    forms["relabelled"].write_text("text,label\n" + "".join(f"{t},x{lab}\n" for t, lab in ROWS))
    return forms


def local(path, **more):
    encoding = {"encoding": "latin-1"} if "latin" in path.name else {}
    return {"name": "local_files", "params": {"path": str(path), "label_column": "label",
                                              **encoding, **more}}


def test_every_form_of_the_same_rows_has_one_fingerprint(tmp_path):
    forms = write_copies(tmp_path)
    ids = DatasetIds(get_registry())
    fingerprints = {name: ids(local(path)).fingerprint for name, path in forms.items()}
    assert len(set(fingerprints.values())) == 1, fingerprints
    subsample = ids(local(forms["csv"], max_examples=5, seed=3))
    assert subsample.fingerprint == fingerprints["csv"]  # a subsample charges its whole corpus
    clear_loaded()
    forms["csv"].write_text(forms["csv"].read_text() + "one more row,b\n")
    assert DatasetIds(get_registry())(local(forms["csv"])).fingerprint != fingerprints["csv"]


def test_way_4_a_copy_in_another_form_is_charged_to_the_cap(tmp_path, budget_plugins,
                                                            private_budget_store):
    forms = write_copies(tmp_path)
    data = "{name: local_files, params: {path: %s, label_column: label}}"
    first = write_spec(tmp_path, "csv", data=data % forms["csv"])
    store = BudgetStore(private_budget_store)
    store.set_cap(DatasetIds(budget_plugins)(local(forms["csv"])), epsilon=1.1 * planned(first),
                  delta=1e-5)
    run_path(first)
    for name in ("jsonl", "renamed", "crlf"):
        copy = write_spec(tmp_path, name.replace(" ", "_"), data=data % forms[name])
        with pytest.raises(BudgetExceededError, match=r"local_files:corpus.csv \[records:"):
            run_path(copy)
    superset = tmp_path / "more.csv"  # one of my own: the capped rows plus new ones
    superset.write_text(forms["csv"].read_text() + "".join(f"w{i} w1,a\n" for i in range(9)))
    with pytest.raises(BudgetExceededError):
        run_path(write_spec(tmp_path, "more", data=data % superset))
    assert len(spent(store, "local_files:corpus.csv")["runs"]) == 1


def test_way_5_two_names_for_one_corpus_share_its_budget(tmp_path, budget_plugins,
                                                         private_budget_store, capsys):
    store = BudgetStore(private_budget_store)
    first = write_spec(tmp_path, "first")
    store.set_cap(DatasetIds(budget_plugins)({"name": "toy_text_alias", "params": {"n_docs": 16}}),
                  epsilon=1.1 * planned(first), delta=1e-5)
    run_path(first)  # read as toy_text
    with pytest.raises(BudgetExceededError):
        run_path(write_spec(tmp_path, "alias", data="{name: toy_text_alias, params: "
                                      "{n_docs: 16}}"))
    larger = "{name: toy_text, params: {n_docs: 64}}"  # a superset: the same 16 and 48 more
    with pytest.raises(BudgetExceededError):
        run_path(write_spec(tmp_path, "larger", data=larger))
    from dpkit.cli.main import main

    store.register(DatasetIds(budget_plugins)({"name": "toy_text", "params": {"n_docs": 64}}))
    assert main(["budget", "status", "toy_text"]) == 0  # both record sets reached as toy_text
    out = capsys.readouterr().out
    assert "reached under the names: toy_text_alias, toy_text" in out
    assert "shares 16 records (100.0% of this one's records)" in out  # the 16 inside the 64
    assert "shares 16 records (25.0% of this one's records)" in out  # seen from the 64


def reuters_cached() -> bool:
    registry = get_registry()
    return all(registry.get("dataset", n).cls.artifact.is_cached()
               for n in ("reuters_r8", "reuters_r52"))


@pytest.mark.skipif(not reuters_cached(), reason="Reuters R8/R52 not in the dpkit cache (dpkit "
                    "data fetch reuters_r8)")
def test_reuters_r8_is_inside_r52_and_shares_its_cap(tmp_path):
    from dpkit.accounting import DpGuarantee, guarantee_to_dict
    from dpkit.budget.store import CellPlan

    ids = DatasetIds(get_registry())
    r8, r52 = ids({"name": "reuters_r8", "params": {}}), ids({"name": "reuters_r52", "params": {}})
    assert len(r8.records) == 7595 and len(r8.records & r52.records) == 7595
    store = BudgetStore(tmp_path / "s.sqlite")
    store.set_cap(r52, epsilon=1.0, delta=1e-5)
    store.register(r8)
    state = store.state()
    assert state.overlaps[r8.fingerprint][r52.fingerprint] == 7595
    pure = [{"label": "q", "count": 1, "guarantee": guarantee_to_dict(DpGuarantee.pure(0.6))}]
    store.reserve({"a": CellPlan(r8, "add_remove", pure)}, "w", "/a")
    with pytest.raises(BudgetExceededError, match="reuters_r52"):
        store.reserve({"a": CellPlan(r8, "add_remove", pure)}, "w", "/b")
