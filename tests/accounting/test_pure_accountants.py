"""dpkit's two accountants on pure and (ε, δ) events, checked against dp-accounting built directly:
the PLD is dp-accounting's ``from_privacy_parameters`` self-composed, the RDP curve is binary
randomized response's; refusals carry their exact messages and compose nothing."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpkit.accounting.pure import (
    NEIGHBORING,
    ApproxDpEvent,
    DpkitPLDAccountant,
    DpkitRdpAccountant,
    PureDpEvent,
    effective_epsilon,
    pure_dp_rdp,
    replace_one_sensitivity,
)

ADD, REPLACE, SPECIAL = (NEIGHBORING[n] for n in ("add_remove", "replace_one", "replace_special"))
ORDERS = [1.0, 1.25, 2.0, 3.5, 8.0, 32.0, 256.0, math.inf]


def direct_pld(epsilon, delta, count, interval=1e-4):
    """dp-accounting's PLD of ``count`` (ε, δ)-DP releases, built without dpkit."""
    pld = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(epsilon, delta),
                                          value_discretization_interval=interval)
    return pld.self_compose(count) if count > 1 else pld


def rr_curve(epsilon, orders):
    """Binary randomized response's Rényi curve at ε, by dp-accounting (p = 2/(1 + e^ε))."""
    p = 2 / (1 + math.exp(epsilon))
    return np.array([epsilon if math.isinf(a) else
                     epsilon * math.tanh(epsilon / 2) if a == 1 else
                     rdp_lib._randomized_response_rdp_replace_one(p, 2, a) for a in orders])


def message(accountant, event):
    details = accountant._maybe_compose(event, 1, False)
    if details is None:
        return None
    assert details.invalid_event is event  # the refusal names the event it refuses
    return details.error_message


def test_the_curve_of_zero_epsilon_is_zero_at_every_order():
    assert [pure_dp_rdp(0.0, a) for a in ORDERS] == [0.0] * len(ORDERS)


@pytest.mark.parametrize(("epsilon", "order"), [(25.900452254575416, 5492.511241584083),
                                                 (26.766431833036233, 1337.7467932060501),
                                                 (1e-4, 1.001), (1e-4, 1.0417755102040815)])
def test_the_curve_never_exceeds_either_bound_even_by_rounding(epsilon, order):
    """ε and αε²/2 (Bun and Steinke) bound every ε-DP curve; the closed form rounds above them
    here by an ulp or so (checked in the test), and the clamp keeps the charged value within."""
    log_mass = np.logaddexp(order * epsilon, (1 - order) * epsilon) - np.logaddexp(0.0, epsilon)
    raw = log_mass / (order - 1)
    assert raw > min(epsilon, order * epsilon * epsilon / 2)  # the unclamped form overshoots
    value = pure_dp_rdp(epsilon, order)
    assert value <= epsilon and value <= order * epsilon * epsilon / 2
    assert value == pytest.approx(raw, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 4.0])
def test_the_curve_is_randomized_response_at_every_order(epsilon):
    ours = np.array([pure_dp_rdp(epsilon, a) for a in ORDERS])
    np.testing.assert_allclose(ours, rr_curve(epsilon, ORDERS), rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 0.0), (2.0, 1e-6), (1.0, 0.3)])
def test_pld_composes_count_releases_as_dp_accounting_does(epsilon, delta, count):
    event = ApproxDpEvent(epsilon, delta) if delta else PureDpEvent(epsilon)
    for interval in (1e-4, 1e-2):
        accountant = DpkitPLDAccountant(value_discretization_interval=interval)
        accountant.compose(dp_accounting.GaussianDpEvent(3.0))
        accountant.compose(event, count)
        expected = pld_lib.from_gaussian_mechanism(3.0, value_discretization_interval=interval)
        expected = expected.compose(direct_pld(epsilon, delta, count, interval))
        for target in (1e-6, 1e-3):
            assert accountant.get_epsilon(target) == pytest.approx(
                expected.get_epsilon_for_delta(target), rel=1e-9, abs=1e-12)


def test_pld_composes_nothing_for_zero_releases_or_a_refusal():
    fresh = DpkitPLDAccountant().compose(dp_accounting.GaussianDpEvent(2.0)).get_epsilon(1e-5)
    accountant = DpkitPLDAccountant().compose(dp_accounting.GaussianDpEvent(2.0))
    assert accountant._maybe_compose(PureDpEvent(3.0), 0, True) is None
    assert accountant.get_epsilon(1e-5) == fresh
    bad = PureDpEvent(3.0, neighboring="replace_one")
    assert accountant._maybe_compose(bad, 2, True).error_message == (
        "ε is stated under replace_one neighbours, which does not bound the ledger's add_remove "
        "relation")
    assert accountant.get_epsilon(1e-5) == fresh


def test_pld_reads_an_add_remove_epsilon_twice_on_a_replace_one_ledger():
    accountant = DpkitPLDAccountant(REPLACE).compose(PureDpEvent(0.5, "add_remove"), 3)
    assert accountant.get_epsilon(1e-6) == pytest.approx(
        direct_pld(1.0, 0.0, 3).get_epsilon_for_delta(1e-6), rel=1e-12)
    special = DpkitPLDAccountant(SPECIAL).compose(PureDpEvent(0.5, "replace_one"), 3)
    assert special.get_epsilon(1e-6) == pytest.approx(
        direct_pld(0.5, 0.0, 3).get_epsilon_for_delta(1e-6), rel=1e-12)


@pytest.mark.parametrize(("p", "k"), [(0.4, 2), (0.3, 5), (0.05, 1000)])
@pytest.mark.parametrize("count", [1, 2, 5])
@pytest.mark.parametrize("interval", [1e-4, 1e-2])
def test_pld_composes_randomized_response_count_times(p, k, count, interval):
    rr = dp_accounting.RandomizedResponseDpEvent(p, k)
    for relation in (REPLACE, SPECIAL):
        accountant = DpkitPLDAccountant(relation, interval)
        assert accountant._maybe_compose(rr, count, False) is None and accountant.supports(rr)
        assert accountant.get_epsilon(1e-6) == 0.0  # checking composes nothing
        accountant.compose(rr, count)
        one = pld_lib.from_randomized_response(p, k, value_discretization_interval=interval,
                                               neighboring_relation=relation)
        expected = one.self_compose(count) if count > 1 else one
        assert accountant.get_epsilon(1e-6) == pytest.approx(
            expected.get_epsilon_for_delta(1e-6), rel=1e-12, abs=1e-12)


def test_pld_randomized_response_edge_cases():
    one_bucket = DpkitPLDAccountant(REPLACE).compose(dp_accounting.RandomizedResponseDpEvent(0.0, 1), 4)
    assert one_bucket.get_epsilon(1e-6) == 0.0  # one bucket reveals nothing, even without noise
    for count in (1, 3):
        noisy_bucket = DpkitPLDAccountant(REPLACE).compose(
            dp_accounting.RandomizedResponseDpEvent(0.5, 1), count)
        assert noisy_bucket.get_epsilon(1e-6) == 0.0
    no_noise = DpkitPLDAccountant(REPLACE).compose(dp_accounting.RandomizedResponseDpEvent(0.0, 3), 4)
    assert no_noise.get_epsilon(1e-6) == math.inf  # p = 0 reports the truth
    accountant = DpkitPLDAccountant(ADD)
    rr = dp_accounting.RandomizedResponseDpEvent(0.3, 5)
    details = accountant._maybe_compose(rr, 3, True)
    assert details is not None and "REPLACE_ONE" in details.error_message
    assert accountant.get_epsilon(1e-6) == 0.0  # a refused event composes nothing
    assert accountant._maybe_compose(rr, 3, False) is not None


def test_refusals_carry_their_exact_messages():
    for accountant in (DpkitPLDAccountant(), DpkitRdpAccountant()):
        assert message(accountant, PureDpEvent(1.0, "swap")) == (
            "unknown neighbouring relation 'swap'; use one of add_remove, replace_one, replace_special")
        for bad in (-0.5, math.inf, math.nan):
            assert message(accountant, PureDpEvent(bad)) == (
                f"epsilon must be a finite number ≥ 0, got {bad!r}")
        assert message(accountant, PureDpEvent(0.0)) is None
        assert message(accountant, PureDpEvent(1.0, "replace_one")) == (
            "ε is stated under replace_one neighbours, which does not bound the ledger's add_remove "
            "relation")
    pld = DpkitPLDAccountant()
    for bad in (-1e-9, 1.5, math.nan):
        assert message(pld, ApproxDpEvent(1.0, bad)) == f"delta must lie in [0, 1], got {bad!r}"
    for good in (0.0, 1.0):
        assert message(pld, ApproxDpEvent(1.0, good)) is None
    assert message(DpkitRdpAccountant(), ApproxDpEvent(1.0, 1e-9)) == (
        "(ε, δ)-DP with δ > 0 has no finite Rényi DP; use accountant='pld'")
    assert message(DpkitRdpAccountant(REPLACE), ApproxDpEvent(1.0, 1e-9)) == (
        "(ε, δ)-DP with δ > 0 has no finite Rényi DP; use accountant='pld'")


def test_effective_epsilon_under_each_declared_relation():
    assert effective_epsilon(PureDpEvent(1.5), REPLACE) == 1.5
    assert effective_epsilon(PureDpEvent(1.5, "add_remove"), REPLACE) == 3.0
    assert effective_epsilon(PureDpEvent(1.5, "add_remove"), ADD) == 1.5
    assert effective_epsilon(PureDpEvent(1.5, "replace_one"), SPECIAL) == 1.5
    assert effective_epsilon(PureDpEvent(1.5, "replace_one"), ADD) is None
    assert effective_epsilon(PureDpEvent(1.5, "add_remove"), SPECIAL) is None
    assert effective_epsilon(PureDpEvent(1.5, "replace_special"), REPLACE) is None


@pytest.mark.parametrize("relation", [ADD, REPLACE, SPECIAL])
def test_rdp_adds_count_times_the_curve_to_what_is_there(relation):
    accountant = DpkitRdpAccountant(orders=ORDERS[1:-1], neighboring_relation=relation)
    accountant.compose(dp_accounting.GaussianDpEvent(4.0))
    before = accountant._rdp.copy()
    accountant.compose(PureDpEvent(0.7), 3)
    accountant.compose(ApproxDpEvent(0.2, 0.0), 2)  # δ = 0: a pure release
    expected = before + 3 * rr_curve(0.7, ORDERS[1:-1]) + 2 * rr_curve(0.2, ORDERS[1:-1])
    np.testing.assert_allclose(accountant._rdp, expected, rtol=1e-12)
    assert accountant._maybe_compose(PureDpEvent(1.0, "swap"), 2, True) is not None
    np.testing.assert_allclose(accountant._rdp, expected, rtol=1e-12)  # a refusal adds nothing


def test_rdp_reads_an_add_remove_epsilon_twice_on_a_replace_one_ledger():
    accountant = DpkitRdpAccountant(orders=ORDERS[1:-1], neighboring_relation=REPLACE)
    accountant.compose(PureDpEvent(0.5, "add_remove"), 2)
    np.testing.assert_allclose(accountant._rdp, 2 * rr_curve(1.0, ORDERS[1:-1]), rtol=1e-12)


@pytest.mark.parametrize("make", [dp_accounting.GaussianDpEvent, dp_accounting.LaplaceDpEvent])
@pytest.mark.parametrize("scale", [0.7, 2.0])
def test_rdp_charges_gaussian_and_laplace_the_replacement_sensitivity(make, scale):
    """Replace-one: the curve of the noise at half the scale (sensitivity 2); other relations:
    dp-accounting's curve unchanged."""
    orders = ORDERS[1:-1]
    event = dp_accounting.SelfComposedDpEvent(make(scale), 3)
    for relation in (ADD, REPLACE, SPECIAL):
        ours = DpkitRdpAccountant(orders=orders, neighboring_relation=relation).compose(event)
        halved = make(scale / 2) if relation == REPLACE else make(scale)
        reference = rdp_lib.RdpAccountant(orders=orders).compose(halved, 3)
        np.testing.assert_allclose(ours._rdp, reference._rdp, rtol=1e-12)
    assert replace_one_sensitivity(make(scale)) == make(scale / 2)
    rr = dp_accounting.RandomizedResponseDpEvent(0.3, 5)
    assert replace_one_sensitivity(rr) is rr
    replaced = DpkitRdpAccountant(orders=orders, neighboring_relation=REPLACE).compose(rr, 2)
    reference = rdp_lib.RdpAccountant(orders=orders, neighboring_relation=REPLACE).compose(rr, 2)
    np.testing.assert_allclose(replaced._rdp, reference._rdp, rtol=1e-12)
