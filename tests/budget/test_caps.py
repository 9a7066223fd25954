"""Whether new spends fit a dataset's cap: every notion counted, every dataset sharing a record
checked, the tolerance only float rounding, and what cannot be counted refused."""

import math
import re

import dp_accounting
import pytest

from dpkit.accounting import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
    guarantee_to_dict,
)
from dpkit.base.errors import BudgetExceededError
from dpkit.budget.caps import admit, totals
from dpkit.budget.filter import filter_epsilon_by_relation
from dpkit.budget.fingerprint import dataset_id
from dpkit.budget.state import Cap, CellState, RunState, State

A, B, C = "records:" + "a" * 64, "records:" + "b" * 64, "records:" + "c" * 64


def spend(g, count=1, label="release"):
    return {"label": label, "count": count, "guarantee": guarantee_to_dict(g)}


def pure(epsilon, count=1):
    return spend(DpGuarantee.pure(epsilon), count)


def metric(eta, space="glove", count=1):
    return spend(MetricDpGuarantee(eta, "l2", space), count, label="tokens")


def anonymity(epsilon, count=1):
    return spend(KAnonymityGuarantee(k_requested=5, k_achieved=5, share_below_k=0.0,
                                     epsilon=epsilon), count, label="weights")


def store_state(caps, past=(), overlaps=()):
    """Datasets A, B, C (``overlaps``: linked pairs), ``caps`` by dataset, and one finished run
    whose cells charged ``past`` ((dataset, relation, spend) triples)."""
    state = State(caps=dict(caps))
    for fp, name in ((A, "alpha"), (B, "beta"), (C, "gamma")):
        state.datasets[fp] = {"name": name, "basis": "16 records"}
    for a, b in overlaps:
        state._link(a, b, 7)
    cells = {f"c{i}": CellState(ds, rel, [], [s], [], "done") for i, (ds, rel, s) in enumerate(past)}
    state.runs[1] = RunState(1, "spec", "/out", "host", 1, "now", cells)
    return state


def test_totals_count_each_notion_as_its_theorem_says():
    """η per token sums one per pass whatever the count (each token released once per pass),
    (k, ε) ε sums ε × count, (ε, δ) goes through the filter at the cap's δ and relation."""
    cap = Cap("replace_one", epsilon=100.0, delta=1e-7, eta=100.0, anonymity_epsilon=100.0)
    gauss = DpGuarantee(dp_accounting.GaussianDpEvent(3.0))
    spends = [("add_remove", metric(1.5, count=40)), ("add_remove", metric(2.0, "fasttext", 9)),
              ("add_remove", anonymity(0.5, 3)), ("add_remove", anonymity(0.25, 2)),
              ("add_remove", spend(gauss, 2)), ("replace_one", pure(0.5, 3))]
    expected = filter_epsilon_by_relation({"add_remove": [(gauss, 2)],
                                           "replace_one": [(DpGuarantee.pure(0.5), 3)]},
                                          1e-7, "replace_one")
    got = totals(cap, spends)
    assert got == {"eta": 3.5, "anonymity_epsilon": 2.0, "epsilon": pytest.approx(expected,
                                                                                  rel=1e-12)}
    assert expected != filter_epsilon_by_relation({"add_remove": [(gauss, 2)],
                                                   "replace_one": [(DpGuarantee.pure(0.5), 3)]},
                                                  1e-5, "replace_one")  # δ matters here


def test_a_dp_spend_with_no_epsilon_cap_or_no_bound_is_infinite_never_free():
    assert totals(Cap("add_remove", eta=1.0), [("add_remove", pure(0.1))])["epsilon"] == math.inf
    assert totals(Cap("add_remove", eta=1.0), [("add_remove", metric(0.1))])["epsilon"] == 0.0
    none = spend(NoGuarantee("the noise was never drawn"))
    capped = Cap("add_remove", epsilon=1.0, delta=1e-5)
    assert totals(capped, [("add_remove", pure(0.1)), ("add_remove", none)])["epsilon"] == math.inf
    assert totals(capped, [("add_remove", pure(0.1))])["epsilon"] == pytest.approx(0.1)
    assert totals(capped, []) == {"epsilon": 0.0, "eta": 0.0, "anonymity_epsilon": 0.0}


def test_a_spend_landing_on_the_cap_fits_and_one_past_it_does_not():
    """Float rounding on the cap is absorbed (0.1 + 0.2 > 0.3 in floats); 10⁻⁶ above is not."""
    state = store_state({A: Cap("add_remove", epsilon=0.3, delta=1e-5)},
                        past=[(A, "add_remove", pure(0.1))])
    assert 0.1 + 0.2 > 0.3
    admit(state, [(A, "add_remove", pure(0.2))], "/s")
    with pytest.raises(BudgetExceededError, match="would bring it to 0.300001"):
        admit(state, [(A, "add_remove", pure(0.200001))], "/s")
    exactly = store_state({A: Cap("add_remove", eta=2.0)}, past=[(A, "add_remove", metric(1.5))])
    admit(exactly, [(A, "add_remove", metric(0.5))], "/s")


def test_every_capped_dataset_sharing_a_record_is_checked_and_counts_its_neighbours_runs():
    """B shares records with A (capped) and C; C's past runs count against A only through B's
    link to it if C itself shares a record with A — it does not here."""
    caps = {A: Cap("add_remove", epsilon=1.0, delta=1e-5)}
    state = store_state(caps, past=[(B, "add_remove", pure(0.6)), (C, "add_remove", pure(5.0))],
                        overlaps=[(A, B), (B, C)])
    admit(state, [(C, "add_remove", pure(50.0))], "/s")  # C does not share a record with A
    admit(state, [(A, "add_remove", pure(0.4))], "/s")
    with pytest.raises(BudgetExceededError, match=r"alpha \[records:aaaaaaaa\] is capped at ε = 1 "
                                                  r"at δ = 1e-05 \(add_remove\); the runs reading "
                                                  r"its records so far have spent ε = 0.6 "
                                                  r"\(privacy filter\) and this run's planned "
                                                  r"spends would bring it to 1.1; remaining "
                                                  r"ε = 0.4; nothing was released \(dpkit budget "
                                                  r"status alpha shows every charge; store /s\)"):
        admit(state, [(C, "add_remove", pure(0.1)), (B, "add_remove", pure(0.5))], "/s")


def test_each_capped_dataset_is_checked_not_only_the_first():
    caps = {A: Cap("add_remove", epsilon=10.0, delta=1e-5), B: Cap("add_remove", epsilon=1.0,
                                                                    delta=1e-5)}
    state = store_state(caps, overlaps=[(A, B)])
    with pytest.raises(BudgetExceededError, match=r"beta \[records:bbbbbbbb\] is capped at ε = 1"):
        admit(state, [(A, "add_remove", pure(2.0))], "/s")


def test_the_remaining_budget_is_never_negative_and_each_notion_names_itself():
    """A cap lowered below what is spent leaves 0; η and (k, ε) name their own symbols."""
    state = store_state({A: Cap("add_remove", eta=1.0)}, past=[(A, "add_remove", metric(3.0))])
    with pytest.raises(BudgetExceededError, match=r"capped at η per token = 1; .* spent η per "
                                                  r"token = 3 and a retry would bring it to 3.5; "
                                                  r"remaining η per token = 0; nothing"):
        admit(state, [(A, "add_remove", metric(0.5))], "/s", "a retry")
    with pytest.raises(BudgetExceededError, match=r"capped at \(k, ε\) ε = 2; .* spent \(k, ε\) ε "
                                                  r"= 1 and .* bring it to 3; remaining \(k, ε\) "
                                                  r"ε = 1; nothing"):
        admit(store_state({A: Cap("add_remove", anonymity_epsilon=2.0)},
                          past=[(A, "add_remove", anonymity(1.0))]),
              [(A, "add_remove", anonymity(1.0, 2))], "/s")


def test_what_the_cap_cannot_count_is_refused_naming_the_fix():
    eps_only = store_state({A: Cap("add_remove", epsilon=1.0, delta=1e-5)})
    with pytest.raises(BudgetExceededError, match=r"alpha \[records:aaaaaaaa\] is capped \(\(ε, "
                                                  r"δ\)-DP: ε = 1 .*\), but not for metric_dp "
                                                  r"spends like 'tokens', .*; add one with dpkit "
                                                  r"budget cap alpha --eta H; nothing was "
                                                  r"released"):
        admit(eps_only, [(A, "add_remove", metric(0.1))], "/s")
    with pytest.raises(BudgetExceededError, match="budget cap alpha --anonymity-epsilon E;"):
        admit(eps_only, [(A, "add_remove", anonymity(0.1))], "/s")
    eta_only = store_state({A: Cap("add_remove", eta=1.0)})
    with pytest.raises(BudgetExceededError, match="budget cap alpha --epsilon E --delta D;"):
        admit(eta_only, [(A, "add_remove", pure(0.1))], "/s")
    with pytest.raises(BudgetExceededError, match=r"a spend with no guarantee \(ε = ∞: the noise "
                                                  r"was never drawn\) would pass any cap"):
        admit(eps_only, [(A, "add_remove", spend(NoGuarantee("the noise was never drawn")))], "/s")


def test_a_spend_in_a_relation_with_no_conversion_is_refused_with_the_reason():
    state = store_state({A: Cap("add_remove", epsilon=100.0, delta=1e-5)})
    with pytest.raises(BudgetExceededError, match=r"alpha \[records:aaaaaaaa\] is capped \(\(ε, "
                                                  r"δ\)-DP.*\), and this run's planned spends "
                                                  r"cannot be counted against it: .*says nothing "
                                                  r"about adding or removing.*; nothing was "
                                                  r"released"):
        admit(state, [(A, "replace_one", pure(0.1))], "/s")
    converted = store_state({A: Cap("replace_one", epsilon=1.0, delta=1e-5)})
    admit(converted, [(A, "add_remove", pure(0.5))], "/s")  # 2 × 0.5: on the cap
    with pytest.raises(BudgetExceededError, match="bring it to 1.2"):
        admit(converted, [(A, "add_remove", pure(0.6))], "/s")


def test_a_refusal_names_the_dataset_and_every_notion_its_cap_governs():
    """As ``dpkit budget status`` names it (a name-keyed fingerprint may hold a colon)."""
    hub = dataset_id("hub:corpus", None)
    state = State(caps={hub.fingerprint: Cap("add_remove", epsilon=1.0, delta=1e-5, eta=2.0)},
                  datasets={hub.fingerprint: {"name": hub.name, "basis": hub.basis}})
    governs = r"\(\(ε, δ\)-DP: ε = 1 at δ = 1e-05 \(add_remove .*\); metric DP \(dχ\): η = 2 per token"
    with pytest.raises(BudgetExceededError, match=rf"^hub:corpus \[name:hub:corp\] is capped "
                                                  rf"{governs}.*\), but not for k_anonymity .* "
                                                  rf"budget cap hub:corpus --anonymity-epsilon E;"):
        admit(state, [(hub.fingerprint, "add_remove", anonymity(0.1))], "/s")
    with pytest.raises(BudgetExceededError, match=rf"^{re.escape(hub.short)} is capped {governs}.*"
                                                  r"\), and this run's planned spends cannot be "):
        admit(state, [(hub.fingerprint, "replace_one", pure(0.1))], "/s")


def test_a_cap_of_zero_admits_only_what_costs_nothing():
    state = store_state({A: Cap("add_remove", anonymity_epsilon=0.0)})
    admit(state, [(A, "add_remove", anonymity(0.0, 3))], "/s")
    with pytest.raises(BudgetExceededError, match=r"capped at \(k, ε\) ε = 0;"):
        admit(state, [(A, "add_remove", anonymity(1e-12))], "/s")
