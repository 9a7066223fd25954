"""Reference values of DESIGN.md §5 through the ledger (dp-accounting 0.6.0), and Opacus."""

import math

import dp_accounting
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

from dpkit.accounting import DpGuarantee, Ledger, dpsgd_event, rdp_curve


def ledger_epsilon(event, accountant="rdp", delta=1e-5, orders=None):
    ledger = Ledger(delta=delta, accountant=accountant, orders=orders)
    ledger.spend(DpGuarantee(event), "ref")
    return ledger.epsilon()


def test_subsampled_gaussian_rdp():
    assert ledger_epsilon(dpsgd_event(4.0, 0.01, 10_000)) == pytest.approx(1.035490, abs=5e-7)


def test_subsampled_gaussian_pld():
    assert ledger_epsilon(dpsgd_event(4.0, 0.01, 10_000), "pld") == pytest.approx(0.947, abs=5e-4)


def test_gaussian_composed_100_times_pld_equals_one_gaussian_sigma_1():
    ledger = Ledger(accountant="pld")
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(10.0)), "release", count=100)
    assert ledger.epsilon() == pytest.approx(4.3771781, abs=5e-8)


def test_sigma_1_5_q_0_04_rdp_default_grid():
    assert ledger_epsilon(dpsgd_event(1.5, 0.04, 2250)) == pytest.approx(7.329335, abs=5e-7)


def test_opacus_agrees_to_1e_4_relative():
    """Opacus's own RDP analysis on its own order grid vs ours on dp-accounting's default grid."""
    alphas = RDPAccountant.DEFAULT_ALPHAS
    rdp = compute_rdp(q=0.04, noise_multiplier=1.5, steps=2250, orders=alphas)
    opacus_eps, _ = get_privacy_spent(orders=alphas, rdp=rdp, delta=1e-5)
    assert opacus_eps == pytest.approx(7.329111, abs=5e-7)
    ours = ledger_epsilon(dpsgd_event(1.5, 0.04, 2250))
    assert abs(ours - opacus_eps) / opacus_eps < 1e-4
    assert ours >= opacus_eps  # dp-accounting's fractional-order RDP is the more conservative
    on_opacus_grid = ledger_epsilon(dpsgd_event(1.5, 0.04, 2250), orders=alphas)
    assert abs(on_opacus_grid - opacus_eps) / opacus_eps < 1e-4


def test_opacus_integer_orders_match_closely():
    alphas = list(range(2, 64))
    theirs = compute_rdp(q=0.04, noise_multiplier=1.5, steps=2250, orders=alphas)
    ours = rdp_curve(dpsgd_event(1.5, 0.04, 2250), alphas)
    for a, t, o in zip(alphas, theirs, ours):
        assert o == pytest.approx(t, rel=1e-6), f"order {a}"


@settings(max_examples=30, deadline=None)
@given(sigma=st.floats(0.1, 100.0), order=st.floats(1.1, 256.0))
def test_gaussian_rdp_at_order(sigma, order):
    (value,) = rdp_curve(dp_accounting.GaussianDpEvent(sigma), [order])
    assert value == pytest.approx(order / (2 * sigma**2), rel=1e-12)


def test_confident_gnmax_pate_mnist_data_independent():
    """640 threshold checks (σ₁=150, sensitivity 1) + 286 GNMax answers (σ₂=40, sensitivity √2)."""
    ledger = Ledger(delta=1e-5)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(150.0)), "threshold check", count=640)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(40.0 / math.sqrt(2))), "GNMax answer",
                 count=286)
    assert ledger.epsilon() == pytest.approx(2.757887, abs=5e-7)
    wrong_sensitivity = Ledger(delta=1e-5)
    wrong_sensitivity.spend(DpGuarantee(dp_accounting.GaussianDpEvent(150.0)), "t", count=640)
    wrong_sensitivity.spend(DpGuarantee(dp_accounting.GaussianDpEvent(40.0)), "a", count=286)
    assert wrong_sensitivity.epsilon() < ledger.epsilon() - 0.3  # sensitivity 1 understates ε
