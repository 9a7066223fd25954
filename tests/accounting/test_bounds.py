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


def test_a_laplace_states_its_sensitivity_under_each_relation():
    """ε = Δ/b: Δ = 1 for an addition/removal (and a swap with the special record), Δ = 2 for a
    replacement (one removal and one addition); no scale, no stated ε."""
    for b in (0.5, 1.0, 4.0):
        lap = dp_accounting.LaplaceDpEvent(b)
        assert stated_privacy(lap, "add_remove") == (1 / b, 0.0)
        assert stated_privacy(lap, "replace_special") == (1 / b, 0.0)
        assert stated_privacy(lap, "replace_one") == (2 / b, 0.0)
    assert stated_privacy(dp_accounting.LaplaceDpEvent(0.0), "add_remove") is None


def test_randomized_response_states_its_epsilon_or_none():
    """ε = log(1 + k(1 − p)/p) from the output law (1 − p + p/k on the truth, p/k elsewhere);
    one bucket or p = 1 reveals nothing (ε = 0); p = 0 (no noise) states no finite ε."""
    for p, k in ((0.3, 5), (0.9, 2), (0.5, 1000)):
        rr = dp_accounting.RandomizedResponseDpEvent(p, k)
        own, other = 1 - p + p / k, p / k
        for relation in ("replace_one", "replace_special"):
            eps, delta = stated_privacy(rr, relation)
            assert eps == pytest.approx(math.log(own / other), rel=1e-12) and delta == 0.0
    assert stated_privacy(dp_accounting.RandomizedResponseDpEvent(0.3, 1), "replace_one") == (0.0, 0.0)
    assert stated_privacy(dp_accounting.RandomizedResponseDpEvent(1.0, 7), "replace_one") == (0.0, 0.0)
    assert stated_privacy(dp_accounting.RandomizedResponseDpEvent(0.0, 5), "replace_one") is None


def test_pure_and_approximate_events_state_their_relation_or_none():
    pure, approx = DpGuarantee.pure(1.5).event, DpGuarantee.approximate(0.5, 1e-6).event
    for relation in ("add_remove", "replace_one", "replace_special"):
        assert stated_privacy(pure, relation) == (1.5, 0.0)
        assert stated_privacy(approx, relation) == (0.5, 1e-6)
    replace = DpGuarantee.pure(1.0, neighboring="replace_one").event
    assert stated_privacy(replace, "add_remove") is None  # a replacement bound says nothing of removals
    assert stated_privacy(replace, "replace_special") == (1.0, 0.0)


def test_split_opens_every_group_in_order_and_multiplies_counts():
    lap, gauss2 = dp_accounting.LaplaceDpEvent(2.0), dp_accounting.GaussianDpEvent(3.0)
    groups = [(GAUSS, 3),
              (dp_accounting.SelfComposedDpEvent(lap, 5), 2),
              (dp_accounting.ComposedDpEvent([gauss2, DpGuarantee.approximate(0.25, 1e-7).event]), 4),
              (dp_accounting.SelfComposedDpEvent(dp_accounting.ComposedDpEvent([gauss2, lap]), 3), 2)]
    split = split_stated(groups, "add_remove")
    assert split.epsilon == pytest.approx(10 * 0.5 + 4 * 0.25 + 6 * 0.5, rel=1e-15)
    assert split.delta == pytest.approx(4e-7, rel=1e-15)
    assert split.rest == [(GAUSS, 3), (gauss2, 4), (gauss2, 6)]
    assert split_stated([(GAUSS, 2)], "add_remove") == (0.0, 0.0, [(GAUSS, 2)])
