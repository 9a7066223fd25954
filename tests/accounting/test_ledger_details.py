"""Ledger details: every spend counted once, no stale answer, refusals that name the spend."""

import json
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import (
    DpGuarantee,
    KAnonymityGuarantee,
    Ledger,
    MetricDpGuarantee,
    NoGuarantee,
    Spend,
)
from dpkit.accounting.serialize import describe
from dpkit.base.errors import AccountingError, BudgetExceededError

GAUSS = DpGuarantee(dp_accounting.GaussianDpEvent(3.0))
LAPLACE = DpGuarantee(dp_accounting.LaplaceDpEvent(2.0))


class NamedMetric(MetricDpGuarantee):
    """A plug-in's own subclass of a dpkit guarantee."""


def rdp(spends, delta=1e-5):
    acct = RdpAccountant()
    for g, count in spends:
        acct.compose(g.event, count)
    return acct.get_epsilon(delta)


def test_delta_range_and_float_settings():
    assert Ledger(delta=0).delta_target == 0.0 and type(Ledger(delta=0).delta_target) is float
    for bad in (1.0, -1e-9, math.nan):
        with pytest.raises(AccountingError, match=r"ledger delta must lie in \[0, 1\), got"):
            Ledger(delta=bad)


def test_every_query_after_a_spend_sees_it():
    ledger = Ledger(accountant="rdp")
    answers = []
    for g in (GAUSS, GAUSS, LAPLACE):
        ledger.spend(g, "step")
        answers.append(ledger.epsilon())
    assert answers[0] < answers[1] < answers[2]
    assert answers[2] == pytest.approx(rdp([(GAUSS, 2), (LAPLACE, 1)]), rel=1e-12)


def test_either_accountant_is_answered_by_that_accountant_in_any_order():
    ledger = Ledger()
    ledger.spend(GAUSS, "step", count=5)
    pld = PLDAccountant().compose(GAUSS.event, 5)
    assert ledger.epsilon(accountant="pld") == pytest.approx(pld.get_epsilon(1e-5), rel=1e-12)
    assert ledger.epsilon(accountant="rdp") == pytest.approx(rdp([(GAUSS, 5)]), rel=1e-12)
    assert ledger.epsilon() == pytest.approx(rdp([(GAUSS, 5)]), rel=1e-12)
    assert ledger.delta(1.0, accountant="pld") == pytest.approx(pld.get_delta(1.0), rel=1e-12)
    assert ledger.composed_accountant(accountant="pld").get_epsilon(1e-5) \
        == pytest.approx(pld.get_epsilon(1e-5), rel=1e-12)
    trial = ledger.composed_accountant(extra=(LAPLACE, 2))
    assert trial.get_epsilon(1e-5) == pytest.approx(rdp([(GAUSS, 5), (LAPLACE, 2)]), rel=1e-12)
    assert ledger.dp_groups(extra=(LAPLACE, 2)) == [(GAUSS.event, 5), (LAPLACE.event, 2)]
    assert ledger.dp_groups() == [(GAUSS.event, 5)]


def test_epsilon_and_delta_refuse_values_outside_their_range():
    ledger = Ledger()
    ledger.spend(GAUSS, "step")
    assert ledger.epsilon(0.0) == pytest.approx(RdpAccountant().compose(GAUSS.event)
                                                .get_epsilon(0.0))
    for bad in (1.0, -0.1):
        with pytest.raises(AccountingError, match=r"^delta must lie in \[0, 1\), got"):
            ledger.epsilon(bad)
    assert ledger.delta(0.0) == pytest.approx(RdpAccountant().compose(GAUSS.event).get_delta(0.0))
    for bad in (-1.0, math.nan):
        with pytest.raises(AccountingError, match=r"^epsilon must be ≥ 0, got"):
            ledger.delta(bad)


def test_spend_refusals_name_the_spend():
    ledger = Ledger()
    with pytest.raises(AccountingError) as info:
        ledger.spend(GAUSS.event, "raw")
    assert str(info.value) == (f"spend 'raw': {GAUSS.event!r} is not a dpkit guarantee; wrap a "
                               "DpEvent as DpGuarantee(event)")
    for count in (True, 1.0, "2", 0, -3):
        with pytest.raises(AccountingError) as info:
            ledger.spend(GAUSS, "x", count=count)
        assert str(info.value) == f"spend 'x': count must be an integer ≥ 1, got {count!r}"
    for label in ("", 3, None):
        with pytest.raises(AccountingError) as info:
            ledger.spend(GAUSS, label)
        assert str(info.value) == f"a spend needs a non-empty label, got {label!r}"
    assert len(ledger) == 0


def test_numpy_counts_and_subclasses_are_recorded():
    ledger = Ledger()
    spend = ledger.spend(GAUSS, "numpy", count=np.int64(3))
    assert spend == Spend(GAUSS, "numpy", 3) and type(spend.count) is int
    ledger.spend(NamedMetric(2.0, space="glove"), "plug-in", count=2)
    assert ledger.eta() == 4.0 and len(ledger) == 2
    assert ledger.spend(GAUSS, "one").count == 1


def test_no_guarantee_spends_are_counted_and_answered_as_infinite():
    ledger = Ledger()
    ledger.spend(NoGuarantee("raw text"), "a", count=3)
    ledger.spend(NoGuarantee("raw text"), "b", count=2)
    ledger.spend(NoGuarantee("threshold"), "c")
    assert ledger.summary()["no_guarantee_spends"] == 6.0
    assert ledger.no_guarantee_reasons == ["raw text", "threshold"]
    assert ledger.epsilon() == math.inf and ledger.delta(1.0) == 1.0


def test_summary_values_are_floats():
    ledger = Ledger(delta=0)
    ledger.spend(DpGuarantee.pure(1.0), "q")
    ledger.spend(KAnonymityGuarantee(4, 3, 0.25, 0.5), "k", count=2)
    summary = ledger.summary()
    assert summary["epsilon"] == 1.0 and summary["delta"] == 0.0
    assert (summary["k_achieved"], summary["k_requested"]) == (3.0, 4.0)
    assert summary["anonymity_epsilon"] == 1.0 and summary["share_below_k"] == 0.25
    assert all(type(v) is float for v in summary.values())


def test_eta_ceiling_counts_from_zero_and_every_release():
    ledger = Ledger(ceiling={"eta": 5.0})
    ledger.spend(MetricDpGuarantee(4.5, space="glove"), "first")  # 4.5 of 5: allowed
    with pytest.raises(BudgetExceededError) as info:
        ledger.spend(MetricDpGuarantee(0.25, space="glove"), "again", count=3)
    assert str(info.value) == (f"spend 'again' ({describe(MetricDpGuarantee(0.25, space='glove'))}, "
                               "×3) would bring η (l2, glove) to 5.25, above the ceiling η = 5; "
                               "remaining η = 0.5; nothing was recorded")
    with pytest.raises(BudgetExceededError, match=r"would bring η \(l2, any space\) to 6"):
        ledger.spend(MetricDpGuarantee(3.0), "unnamed", count=2)
    ledger.spend(MetricDpGuarantee(0.25, space="glove"), "fits", count=2)
    assert ledger.eta(space="glove") == 5.0


def test_anonymity_ceiling_counts_from_zero_and_every_release():
    ledger = Ledger(ceiling={"anonymity_epsilon": 1.0})
    ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 0.9), "first")
    with pytest.raises(BudgetExceededError) as info:
        ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 0.05), "again", count=3)
    assert "would bring the anonymity ε to 1.05, above the ceiling (k, ε) ε = 1" in str(info.value)
    ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 0.05), "fits", count=2)
    assert ledger.k_anonymity().epsilon == pytest.approx(1.0)


def test_epsilon_ceiling_counts_the_spend_with_its_count():
    cap = 1.01 * rdp([(GAUSS, 2)])
    ledger = Ledger(ceiling=cap)
    ledger.spend(GAUSS, "first")
    before = ledger.epsilon()
    after = rdp([(GAUSS, 4)])
    with pytest.raises(BudgetExceededError) as info:
        ledger.spend(GAUSS, "more", count=3)
    assert str(info.value).startswith(
        f"spend 'more' ({describe(GAUSS)}, ×3) would bring ε to {after:.6g} at δ=1e-05, above the "
        f"ceiling ε = {cap:g}; remaining ε = {cap - before:.6g}")
    ledger.spend(GAUSS, "fits", count=1)
    assert len(ledger) == 2


def test_remaining_starts_at_the_ceiling():
    ledger = Ledger(ceiling={"epsilon": 2.0, "eta": 5.0, "anonymity_epsilon": 1.0})
    assert ledger.remaining() == {"epsilon": 2.0, "eta": 5.0, "anonymity_epsilon": 1.0}
    assert Ledger().remaining() == dict.fromkeys(("epsilon", "eta", "anonymity_epsilon"), math.inf)
    ledger.spend(MetricDpGuarantee(1.0, space="a"), "a")
    ledger.spend(MetricDpGuarantee(3.0, space="b"), "b")
    assert ledger.remaining()["eta"] == 2.0  # the most used key


def test_the_record_names_every_setting_and_spend():
    ledger = Ledger(delta=1e-6, orders=[2.0, 8.0], neighboring="replace_one", ceiling=3.0)
    ledger.spend(LAPLACE, "count", count=2)
    record = json.loads(json.dumps(ledger.to_dict(), allow_nan=False))
    assert record["format"] == "dpkit-ledger/1"
    assert (record["delta"], record["accountant"], record["neighboring"]) == (1e-6, "rdp", "replace_one")
    assert record["orders"] == [2.0, 8.0] and record["pld_discretization"] is None
    assert record["ceiling"] == {"epsilon": 3.0, "eta": None, "anonymity_epsilon": 3.0}
    assert record["spends"] == [{"label": "count", "count": 2,
                                 "guarantee": record["spends"][0]["guarantee"]}]
    assert record["summary"] == {"epsilon": ledger.epsilon(), "delta": 1e-6}
    assert record["no_guarantee_reasons"] == []
    assert Ledger().to_dict()["ceiling"] is None
    unbounded = Ledger()
    unbounded.spend(NoGuarantee("verbatim"), "leak")
    assert unbounded.to_dict()["no_guarantee_reasons"] == ["verbatim"]
    assert unbounded.to_dict()["summary"]["epsilon"] == "inf"


def test_a_record_rebuilds_the_same_ledger():
    ledger = Ledger(delta=1e-6, orders=[2.0, 8.0], neighboring="replace_one", ceiling=30.0)
    ledger.spend(LAPLACE, "count", count=2)
    ledger.spend(GAUSS, "mean", count=3)
    again = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert (again.orders, again.neighboring, again.delta_target) == ([2.0, 8.0], "replace_one", 1e-6)
    assert again.epsilon() == ledger.epsilon()
    assert again.spends == ledger.spends and again.to_dict() == ledger.to_dict()
    pld = Ledger(accountant="pld", pld_discretization=1e-2)
    pld.spend(LAPLACE, "count", count=20)
    assert Ledger.from_dict(pld.to_dict()).epsilon() == pld.epsilon()
    with pytest.raises(AccountingError) as info:
        Ledger.from_dict({"format": "dpkit-ledger/0"})
    assert str(info.value) == ("not a dpkit ledger record: format='dpkit-ledger/0', expected "
                               "'dpkit-ledger/1'")


def test_a_record_without_a_relation_is_read_as_add_remove():
    ledger = Ledger()
    ledger.spend(GAUSS, "mean")
    record = ledger.to_dict()
    del record["neighboring"]
    again = Ledger.from_dict(record)
    assert again.neighboring == "add_remove" and again.epsilon() == ledger.epsilon()


def test_a_capped_ledger_refuses_an_unbounded_spend_by_name():
    ledger = Ledger(ceiling=1.0)
    leak = NoGuarantee("raw text")
    with pytest.raises(BudgetExceededError) as info:
        ledger.spend(leak, "leak", count=2)
    assert str(info.value).startswith(f"spend 'leak' ({describe(leak)}, ×2) has no valid guarantee, "
                                      "so ε = ∞")
    assert len(ledger) == 0


def test_the_same_guarantee_spent_again_adds_up():
    ledger = Ledger()
    metric = MetricDpGuarantee(0.5, space="glove")
    kanon = KAnonymityGuarantee(5, 4, 0.1, 0.25)
    for count in (2, 3):
        ledger.spend(metric, "pass", count=count)
        ledger.spend(MetricDpGuarantee(0.5, space="glove"), "equal pass", count=count)
        ledger.spend(kanon, "tables", count=count)
    assert ledger.eta() == 5.0 and ledger.eta_per_token() == 2.0  # 10 releases in 4 passes
    total = ledger.k_anonymity()
    assert (total.epsilon, total.releases) == (1.25, 5)


@pytest.mark.parametrize("field, value", [
    ("delta_target", 0.5), ("accountant", "pld"), ("neighboring", "replace_one"),
    ("orders", [2.0]), ("pld_discretization", 1e-2), ("ceiling", None)])
def test_the_settings_are_fixed_when_the_ledger_is_built(field, value):
    """Adversarial: a plug-in holding the cell's ledger cannot report its ε at another δ, under
    another accountant or relation, or lift its cap."""
    ledger = Ledger(3e-6, accountant="rdp", ceiling=2.0, orders=[8.0, 16.0])
    ledger.spend(DpGuarantee.pure(0.5), "g")
    before = (ledger.epsilon(), ledger.summary(), ledger.to_dict())
    with pytest.raises(AttributeError):
        setattr(ledger, field, value)
    assert (ledger.epsilon(), ledger.summary(), ledger.to_dict()) == before
    with pytest.raises(BudgetExceededError):
        ledger.spend(DpGuarantee.pure(5.0), "past the cap")


def test_the_settings_read_as_given():
    rdp = Ledger(3e-6, accountant="rdp", orders=[8.0, 16.0], neighboring="replace_one",
                 ceiling=2.0)
    assert (rdp.delta_target, rdp.accountant, rdp.neighboring, rdp.orders,
            rdp.pld_discretization) == (3e-6, "rdp", "replace_one", [8.0, 16.0], None)
    assert rdp.ceiling is not None and rdp.ceiling.epsilon == 2.0
    rdp.orders.append(32.0)  # a copy: the ledger's orders stay
    assert rdp.orders == [8.0, 16.0]
    pld = Ledger(accountant="pld", pld_discretization=1e-3)
    assert (pld.delta_target, pld.accountant, pld.neighboring, pld.orders, pld.pld_discretization,
            pld.ceiling) == (1e-5, "pld", "add_remove", None, 1e-3, None)
