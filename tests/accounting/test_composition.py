"""DpComposition: every spend counted, a kept composition never stale, the tightest valid bound."""

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import DpGuarantee, Ledger
from dpkit.accounting import events as ev
from dpkit.accounting.composition import DpComposition
from dpkit.base.errors import AccountingError

GAUSS = DpGuarantee(dp_accounting.GaussianDpEvent(3.0))
LAPLACE = DpGuarantee(dp_accounting.LaplaceDpEvent(2.0))


def reference_epsilon(accountant, spends, delta=1e-5):
    """ε of ``spends`` ((guarantee, count) pairs) composed one by one with dp-accounting."""
    for g, count in spends:
        accountant.compose(g.event, count)
    return accountant.get_epsilon(delta)


def test_settings_are_kept_as_given():
    comp = DpComposition()
    assert (comp.accountant, comp.neighboring, comp.orders, comp.discretization) \
        == ("rdp", "add_remove", None, None)
    comp = DpComposition("pld", None, "replace_one", 1e-2)
    assert (comp.accountant, comp.neighboring, comp.discretization) == ("pld", "replace_one", 1e-2)
    assert DpComposition("pld").discretization is None
    assert DpComposition(orders=(2, 4)).orders == [2, 4]
    assert not DpComposition()


@pytest.mark.parametrize("kwargs, message", [
    (dict(accountant="pld", orders=[2.0]), "RDP orders were given with accountant='pld'; drop them"),
    (dict(discretization=1e-3), "a PLD discretisation interval was given with accountant='rdp'; "
                                "drop it or use accountant='pld'"),
    (dict(accountant="pld", discretization=2.0), "PLD discretisation interval must lie in (0, 1)"),
    (dict(accountant="moments"), "unknown accountant 'moments'"),
    (dict(neighboring="swap"), "unknown neighbouring relation 'swap'"),
])
def test_bad_settings_are_refused_with_what_to_do(kwargs, message):
    with pytest.raises(AccountingError) as info:
        DpComposition(**kwargs)
    assert str(info.value).startswith(message)


def test_check_names_the_spend():
    comp = DpComposition()
    comp.check(GAUSS, "mean")
    with pytest.raises(AccountingError, match=r"^spend 'approx': the RDP accountant"):
        comp.check(DpGuarantee.approximate(1.0, 1e-6), "approx")
    with pytest.raises(AccountingError, match=r"^spend 'rr': the RDP accountant \(replace_one"):
        DpComposition(neighboring="replace_one").check(
            DpGuarantee(ev.dpsgd_event(1.0, 0.5, 1)), "rr")


def test_every_application_is_counted_and_a_kept_composition_is_never_stale():
    comp = DpComposition()
    answers = []
    for g, count in [(GAUSS, 2), (GAUSS, 1), (LAPLACE, 1), (DpGuarantee(GAUSS.event), 3)]:
        comp.add(g, count)
        answers.append(comp.epsilon(1e-5))
    assert comp.groups() == [(GAUSS.event, 6), (LAPLACE.event, 1)]
    assert answers == sorted(answers) and len(set(answers)) == 4  # each spend raised ε
    assert answers[-1] == pytest.approx(
        reference_epsilon(RdpAccountant(), [(GAUSS, 6), (LAPLACE, 1)]), rel=1e-12)
    assert comp.epsilon(1e-5, accountant="pld") == pytest.approx(
        reference_epsilon(PLDAccountant(), [(GAUSS, 6), (LAPLACE, 1)]), rel=1e-12)


def test_a_guarantee_is_keyed_once(monkeypatch):
    keyed = []
    original = ev.event_key
    monkeypatch.setattr(ev, "event_key", lambda event: keyed.append(event) or original(event))
    comp = DpComposition()
    for _ in range(5):
        comp.add(GAUSS, 1)
    assert len(keyed) == 1 and comp.groups() == [(GAUSS.event, 5)]


def test_extra_is_a_trial_spend_not_a_record():
    comp = DpComposition()
    comp.add(GAUSS, 2)
    assert comp.groups((LAPLACE, 3)) == [(GAUSS.event, 2), (LAPLACE.event, 3)]
    assert comp.groups((GAUSS, 3)) == [(GAUSS.event, 5)]
    with_extra = comp.epsilon(1e-5, extra=(LAPLACE, 3))
    assert with_extra == pytest.approx(
        reference_epsilon(RdpAccountant(), [(GAUSS, 2), (LAPLACE, 3)]), rel=1e-12)
    assert comp.groups() == [(GAUSS.event, 2)]
    assert comp.epsilon(1e-5) == pytest.approx(reference_epsilon(RdpAccountant(), [(GAUSS, 2)]),
                                               rel=1e-12)
    acct = comp.accountant_for((LAPLACE, 3))
    assert acct.get_epsilon(1e-5) == pytest.approx(with_extra, rel=1e-12)


def test_own_settings_for_own_accountant_and_defaults_for_the_other():
    orders = [2.0, 4.0]
    comp = DpComposition(orders=orders, neighboring="replace_one")
    comp.add(GAUSS, 4)
    relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    # RDP under replace-one charges the Gaussian at the replacement's (doubled) sensitivity
    replaced = DpGuarantee(dp_accounting.GaussianDpEvent(1.5))
    assert comp.epsilon(1e-5) == pytest.approx(reference_epsilon(
        RdpAccountant(orders=orders, neighboring_relation=relation), [(replaced, 4)]), rel=1e-12)
    assert comp.epsilon(1e-5, accountant="pld") == pytest.approx(reference_epsilon(
        PLDAccountant(relation), [(GAUSS, 4)]), rel=1e-12)
    pld = DpComposition("pld", discretization=1e-2)
    pld.add(LAPLACE, 5)
    assert pld.epsilon(1e-5) == pytest.approx(reference_epsilon(
        PLDAccountant(value_discretization_interval=1e-2), [(LAPLACE, 5)]), rel=1e-12)
    assert pld.accountant_for(accountant="rdp").get_epsilon(1e-5) == pytest.approx(
        reference_epsilon(RdpAccountant(), [(LAPLACE, 5)]), rel=1e-12)
    assert pld.delta(1.0) == pytest.approx(
        PLDAccountant(value_discretization_interval=1e-2).compose(LAPLACE.event, 5).get_delta(1.0),
        rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_pure_spends_at_delta_zero_are_basic_composition(accountant):
    """ε-DP releases compose to Σε at δ = 0; the accountants' conversions say more (or ∞)."""
    comp = DpComposition(accountant)
    comp.add(DpGuarantee.pure(0.5), 3)
    comp.add(LAPLACE, 2)
    assert comp.epsilon(0.0) == math.fsum([3 * 0.5, 2 * 0.5])
    assert comp.delta(math.fsum([3 * 0.5, 2 * 0.5])) == 0.0


def test_approximate_spends_are_bounded_by_basic_composition_from_their_summed_delta():
    comp = DpComposition("pld")
    comp.add(DpGuarantee.approximate(1.0, 2e-6), 3)
    summed = math.fsum([3 * 2e-6])
    assert comp.epsilon(summed) <= 3.0
    assert comp.delta(3.0) == min(comp.accountant_for().get_delta(3.0), summed)


def test_delta_never_exceeds_one():
    comp = DpComposition("pld")
    comp.add(DpGuarantee.approximate(5.0, 0.9), 10)
    comp.add(GAUSS, 1)
    assert 0.99 < comp.delta(0.0) <= 1.0


def test_ledger_without_settings_records_none_for_them():
    record = Ledger(accountant="pld").to_dict()
    assert record["pld_discretization"] is None and record["orders"] is None
