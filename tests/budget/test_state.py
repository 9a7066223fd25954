"""The store's state replayed from its log: what each cell counts and which datasets share a cap."""

from __future__ import annotations

import itertools

from dpkit.accounting import DpGuarantee, guarantee_to_dict
from dpkit.budget.chain import Entry
from dpkit.budget.state import Cap, State, replay, spend_key

_SEQ = itertools.count(1)


def entry(kind: str, **body) -> Entry:
    seq = next(_SEQ)
    return Entry(seq, kind, body, f"2026-01-01T00:00:{seq % 60:02d}", f"h{seq}")


def pure(epsilon: float, count: int = 1, label: str = "r") -> dict:
    return {"label": label, "count": count, "guarantee": guarantee_to_dict(DpGuarantee.pure(epsilon))}


def dataset(fp: str, name: str = "corpus", overlaps: dict | None = None, legacy: bool = False) -> Entry:
    return entry("dataset", id=fp, name=name, basis="test", records=10, overlaps=overlaps or {},
                 legacy=legacy)


def run(number: int, cells: dict) -> Entry:
    return entry("run", run=number, spec="s.yaml", out_dir="out", host="h", pid=1, cells=cells)


def cell(fp: str = "a", spends: list | None = None, relation: str = "add_remove") -> dict:
    return {"dataset": fp, "relation": relation, "spends": spends}


def test_a_spends_identity_is_its_label_count_and_guarantee_in_any_key_order():
    spend = pure(1.0, 2)
    reordered = {"guarantee": dict(reversed(spend["guarantee"].items())), "count": 2.0,
                 "label": "r"}
    assert spend_key(spend) == spend_key(reordered)
    assert len({spend_key(s) for s in (spend, pure(1.0, 3), pure(2.0, 2), pure(1.0, 2, "x"))}) == 4


def test_an_open_or_spent_cell_counts_its_charges_and_what_its_reservation_still_holds():
    state = replay([dataset("a"), run(1, {"c": cell(spends=[pure(1.0), pure(1.0), pure(2.0)])}),
                    entry("charge", run=1, cell="c", spend=pure(1.0))])
    c = state.runs[1].cells["c"]
    assert c.reserved == [pure(1.0), pure(1.0), pure(2.0)]  # the plan stays as reserved
    assert c.charges == [pure(1.0)]
    assert c.unmatched == [pure(1.0), pure(2.0)]  # one charge matches one planned spend only
    assert c.counted() == [pure(1.0), pure(1.0), pure(2.0)]
    for outcome, counted in (("spent", [pure(1.0), pure(1.0), pure(2.0)]), ("done", [pure(1.0)]),
                             ("failed", [pure(1.0)]), ("released", [pure(1.0)])):
        state.apply(entry("end", run=1, cell="c", outcome=outcome))
        assert (c.ended, c.counted()) == (outcome, counted)


def test_a_charge_nothing_planned_matches_is_counted_and_holds_the_plan_back():
    state = replay([dataset("a"), run(1, {"c": cell(spends=[pure(1.0)]), "d": cell()}),
                    entry("charge", run=1, cell="c", spend=pure(5.0)),
                    entry("charge", run=1, cell="d", spend=pure(0.5))])
    c, d = state.runs[1].cells["c"], state.runs[1].cells["d"]
    assert c.counted() == [pure(5.0), pure(1.0)] and c.unmatched == [pure(1.0)]
    assert d.reserved == d.unmatched == [] and d.counted() == [pure(0.5)]


def test_settling_a_run_ends_each_named_cell_and_closes_the_run():
    started = run(1, {"c": cell(spends=[pure(1.0)]), "d": cell(spends=[pure(2.0)])})
    state = replay([dataset("a"), started,
                    entry("settle", run=1, cells={"c": "spent", "d": "released"}, state="closed",
                          by="dpkit budget settle")])
    r = state.runs[1]
    assert (r.state, r.settled_by) == ("closed", "dpkit budget settle")
    assert r.cells["c"].counted() == [pure(1.0)] and r.cells["d"].counted() == []
    assert (r.id, r.spec, r.out_dir, r.host, r.pid, r.started) == (1, "s.yaml", "out", "h", 1,
                                                                   started.at)


def test_a_migrated_run_is_closed_with_every_spend_charged():
    migrated = entry("migrated", run=7, spec="old.yaml", out_dir="o",
                     cells={"c": cell(spends=[pure(1.0), pure(2.0, 3)])})
    r = replay([dataset("a"), migrated]).runs[7]
    assert (r.id, r.state, r.settled_by, r.spec, r.out_dir) == (7, "closed", "migration", "old.yaml", "o")
    assert (r.host, r.pid, r.started) == ("", 0, migrated.at)  # no live process to ask about
    c = r.cells["c"]
    assert (c.dataset, c.relation, c.ended) == ("a", "add_remove", "done")
    assert c.counted() == c.charges == [pure(1.0), pure(2.0, 3)] and c.reserved == c.unmatched == []


def test_datasets_that_share_a_record_reach_each_others_cells_both_ways():
    state = replay([dataset("a"), dataset("b", "other", {"a": 3}), dataset("c", "third", {"a": 0, "b": 2}),
                    dataset("d", "apart"),
                    run(1, {"x": cell("a"), "y": cell("b"), "z": cell("c"), "w": cell("d")})])
    assert state.overlaps["a"] == {"b": 3, "c": 0} and state.overlaps["b"] == {"a": 3, "c": 2}
    assert sorted(state.linked("a")) == ["a", "b"]  # no shared record: not linked
    assert sorted(state.linked("b")) == ["a", "b", "c"]
    assert state.linked("d") == ["d"] and state.linked("unknown") == ["unknown"]
    assert sorted(k for _, k, _ in state.cells_reading("a")) == ["x", "y"]
    assert sorted(k for _, k, _ in state.cells_reading("b")) == ["x", "y", "z"]
    assert [(r.id, k, c.dataset) for r, k, c in state.cells_reading("d")] == [(1, "w", "d")]
    assert state.datasets["b"] == {"fingerprint": "b", "name": "other", "names": ["other"],
                                   "basis": "test", "records": 10, "created": state.datasets["b"]["created"],
                                   "legacy": False}


def test_a_schema_1_dataset_shares_its_budget_with_every_dataset_of_its_name():
    state = replay([dataset("legacy:x", "corpus", legacy=True), dataset("new", "corpus"),
                    dataset("same-name", "corpus", {"new": 4}), dataset("elsewhere", "other")])
    assert state.datasets["legacy:x"]["legacy"] is True
    assert sorted(state.linked("legacy:x")) == ["legacy:x", "new", "same-name"]
    assert state.overlaps["new"]["legacy:x"] == -1  # unknown overlap: assumed shared
    assert state.overlaps["new"]["same-name"] == 4  # a known overlap is kept
    assert "elsewhere" not in state.linked("legacy:x")
    # two current datasets of one name share nothing unless their records overlap
    plain = replay([dataset("p", "corpus"), dataset("q", "corpus")])
    assert plain.linked("p") == ["p"] and plain.linked("q") == ["q"]


def test_a_new_name_for_a_dataset_links_it_to_the_schema_1_dataset_of_that_name():
    state = replay([dataset("legacy:x", "old-name", legacy=True), dataset("new", "corpus"),
                    entry("alias", id="new", name="old-name"), entry("alias", id="new", name="old-name")])
    assert state.datasets["new"]["names"] == ["corpus", "old-name"]
    assert sorted(state.linked("new")) == ["legacy:x", "new"]
    assert state.linked("legacy:x") == ["legacy:x", "new"]


def test_a_known_overlap_with_a_schema_1_dataset_is_kept_not_replaced():
    state = replay([dataset("legacy:x", "corpus", legacy=True),
                    dataset("new", "corpus", {"legacy:x": 2})])
    assert state.overlaps["new"]["legacy:x"] == state.overlaps["legacy:x"]["new"] == 2
    state.apply(entry("alias", id="new", name="corpus"))
    assert state.overlaps["new"]["legacy:x"] == 2


def test_caps_are_set_replaced_and_lifted_with_their_history():
    state = replay([dataset("a"),
                    entry("cap", id="a", act="set", relation="add_remove", epsilon=1.0, delta=1e-5,
                          eta=2.0, anonymity_epsilon=3.0),
                    entry("cap", id="a", act="set", relation="replace_one", epsilon=0.5, delta=1e-6)])
    assert state.caps["a"] == Cap("replace_one", 0.5, 1e-6, None, None)
    state.apply(entry("cap", id="a", act="lift"))
    state.apply(entry("cap", id="b", act="lift"))  # lifting no cap changes nothing
    assert state.caps == {}
    assert [(h["act"], h.get("epsilon")) for h in state.cap_history] == [
        ("set", 1.0), ("set", 0.5), ("lift", None), ("lift", None)]
    assert [h["seq"] for h in state.cap_history] == sorted(h["seq"] for h in state.cap_history)
    assert all(h["at"] for h in state.cap_history)
    first = replay([entry("cap", id="a", act="set", relation="add_remove", epsilon=1.0,
                          delta=1e-5, eta=2.0, anonymity_epsilon=3.0)])
    assert first.caps["a"] == Cap("add_remove", 1.0, 1e-5, 2.0, 3.0)


def test_an_empty_log_is_an_empty_state():
    assert replay([]) == State()
