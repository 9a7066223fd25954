"""The tightest valid bound: basic composition where the accountants' conversions lose, either
accountant from one ledger."""

import math

import dp_accounting
import pytest

from dpkit.accounting import DpGuarantee, Ledger, epsilon_of
from dpkit.accounting.bounds import split_stated, stated_privacy
from dpkit.base.errors import AccountingError

GAUSS = dp_accounting.GaussianDpEvent(2.0)


def test_pure_spends_never_exceed_basic_composition():
    """The issue's case: RDP alone says 128.003 for 32 releases of ε = 4."""
    ledger = Ledger(delta=1e-5)
    ledger.spend(DpGuarantee.pure(4.0), "query", count=32)
    rdp_alone = ledger.composed_accountant().get_epsilon(1e-5)
    assert rdp_alone > 128.0
    assert ledger.epsilon() == 128.0
    assert ledger.delta(128.0) == 0.0  # 128-DP: no failure probability at ε = 128
    assert ledger.epsilon(accountant="pld") <= 128.0


def test_a_mix_is_left_to_the_accountant():
    """Each pure release's Rényi curve is ≤ ε at every order: the joint RDP bound is the tighter."""
    ledger = Ledger(delta=1e-5)
    ledger.spend(DpGuarantee.pure(4.0), "pure", count=32)
    ledger.spend(DpGuarantee(GAUSS), "gauss", count=3)
    split = 128.0 + epsilon_of(dp_accounting.SelfComposedDpEvent(GAUSS, 3), 1e-5)
    assert ledger.epsilon() == ledger.composed_accountant().get_epsilon(1e-5) < split


def test_gaussian_only_ledgers_are_unchanged():
    ledger = Ledger(delta=1e-5)
    ledger.spend(DpGuarantee(GAUSS), "gauss", count=10)
    assert ledger.epsilon() == ledger.composed_accountant().get_epsilon(1e-5)


def test_approximate_spends_add_their_deltas():
    ledger = Ledger(delta=1e-5, accountant="pld")
    ledger.spend(DpGuarantee.approximate(1.0, 2e-6), "a", count=3)
    assert ledger.epsilon() <= 3.0
    assert ledger.delta(3.0) <= 6e-6 + 1e-15
    tight = Ledger(delta=5e-6, accountant="pld")  # Σδ = 6e-6 > 5e-6: basic composition says nothing
    tight.spend(DpGuarantee.approximate(1.0, 2e-6), "a", count=3)
    assert tight.epsilon() == tight.composed_accountant().get_epsilon(5e-6)


def test_stated_privacy_of_each_kind():
    assert stated_privacy(dp_accounting.LaplaceDpEvent(0.5), "add_remove") == (2.0, 0.0)
    rr = dp_accounting.RandomizedResponseDpEvent(0.3, 5)
    assert stated_privacy(rr, "replace_one") == (pytest.approx(math.log(1 + 5 * 0.7 / 0.3)), 0.0)
    assert stated_privacy(rr, "add_remove") is None  # RR is stated for replacements only
    assert stated_privacy(DpGuarantee.pure(1.0, neighboring="add_remove").event, "replace_one") \
        == (2.0, 0.0)
    assert stated_privacy(GAUSS, "add_remove") is None
    nested = dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 4), GAUSS])
    split = split_stated([(nested, 2)], "add_remove")
    assert (split.epsilon, split.delta, split.rest) == (8.0, 0.0, [(GAUSS, 2)])


def test_either_accountant_answers_from_one_ledger():
    event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(4.0))
    rdp_ledger, pld_ledger = Ledger(), Ledger(accountant="pld")
    for ledger in (rdp_ledger, pld_ledger):
        ledger.spend(DpGuarantee(event), "step", count=10_000)
    assert rdp_ledger.epsilon() == pytest.approx(1.035490, abs=5e-7)
    assert rdp_ledger.epsilon(accountant="pld") == pytest.approx(pld_ledger.epsilon(), rel=1e-12)
    assert pld_ledger.epsilon(accountant="rdp") == pytest.approx(rdp_ledger.epsilon(), rel=1e-12)
    assert rdp_ledger.delta(1.0, accountant="pld") == pytest.approx(pld_ledger.delta(1.0), rel=1e-12)
    assert rdp_ledger.delta(1.0, accountant="pld") < rdp_ledger.delta(1.0)


def test_an_event_the_other_accountant_cannot_compose_is_refused_clearly():
    ledger = Ledger()
    ledger.spend(DpGuarantee(dp_accounting.ZCDpEvent(0.5)), "zcdp")
    assert ledger.epsilon() > 0
    with pytest.raises(AccountingError, match="PLD accountant"):
        ledger.epsilon(accountant="pld")
    with pytest.raises(AccountingError, match="unknown accountant"):
        ledger.epsilon(accountant="moments")
