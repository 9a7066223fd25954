"""Ledger faults: unsupported events refused at spend, exact grouping, one composition per state."""

import dp_accounting
import numpy as np
import pytest
from dp_accounting.dp_event import MixtureOfGaussiansDpEvent
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import (
    DpGuarantee,
    Ledger,
    calibrate_gaussian,
    epsilon_of,
    group_events,
)
from dpkit.base.errors import AccountingError

RR = dp_accounting.RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=4)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_spend_refuses_an_event_no_accountant_supports(accountant):
    ledger = Ledger(accountant=accountant)  # no ceiling: the refusal must still come at spend
    with pytest.raises(AccountingError) as info:
        ledger.spend(DpGuarantee(RR), "rr")
    message = str(info.value)
    assert "'rr'" in message and "RandomizedResponseDpEvent" in message
    assert "RDP" in message and "PLD" in message and "cannot either" in message
    assert "replace_one" in message  # what to do: the relation randomized response is stated in
    assert len(ledger) == 0 and ledger.epsilon() == 0.0  # the ledger still answers


def test_spend_suggests_the_other_accountant_only_when_it_works():
    with pytest.raises(AccountingError, match="use accountant='pld'"):
        Ledger().spend(DpGuarantee.approximate(1.0, 1e-6), "approx")
    with pytest.raises(AccountingError, match="cannot either"):
        Ledger().spend(DpGuarantee(dp_accounting.UnsupportedDpEvent()), "unknown")


def _mixtures():
    """Two different mixture-of-Gaussians events whose printed forms are identical."""
    base = np.zeros(1001)
    base[-1] = 1.0
    other = base.copy()
    other[500] = 3.0
    probs = np.full(1001, 1 / 1001)
    first = MixtureOfGaussiansDpEvent(1.0, base, probs)
    second = MixtureOfGaussiansDpEvent(1.0, other, probs)
    assert repr(first) == repr(second)  # numpy elides the middle of long arrays
    return first, second


def test_events_group_only_when_equal():
    first, second = _mixtures()
    same = MixtureOfGaussiansDpEvent(1.0, first.sensitivities.copy(), first.sampling_probs.copy())
    groups = group_events([(first, 1), (second, 1), (same, 2)])
    assert [count for _, count in groups] == [3, 1]
    assert groups[0][0] is first and groups[1][0] is second


def test_mixture_of_gaussians_matches_dp_accounting():
    first, second = _mixtures()
    ledger = Ledger(accountant="pld", pld_discretization=1e-2)
    ledger.spend(DpGuarantee(first), "first")
    ledger.spend(DpGuarantee(second), "second")
    reference = PLDAccountant(value_discretization_interval=1e-2).compose(
        dp_accounting.ComposedDpEvent([first, second]))
    assert ledger.epsilon() == pytest.approx(reference.get_epsilon(1e-5), rel=1e-9)
    assert ledger.epsilon() > 1.0  # the merged (wrong) pair gives about 0.017


def test_queries_reuse_one_composition(monkeypatch):
    built = []
    original = pld_lib.from_gaussian_mechanism
    monkeypatch.setattr(pld_lib, "from_gaussian_mechanism",
                        lambda *a, **k: built.append(1) or original(*a, **k))
    ledger = Ledger(accountant="pld", ceiling=50.0)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "step", count=4)
    for delta in (1e-3, 1e-5, 1e-7, 1e-9):
        ledger.epsilon(delta)
    for epsilon in (0.5, 1.0, 2.0):
        ledger.delta(epsilon)
    assert len(built) == 1  # the ceiling check's composition is kept and queried 7 times
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "step")
    ledger.epsilon(1e-3)
    assert len(built) == 2


def test_pld_discretization_is_settable_and_checked():
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 20)
    coarse = epsilon_of(event, 1e-6, "pld", discretization=1e-2)
    fine = epsilon_of(event, 1e-6, "pld", discretization=1e-4)
    reference = PLDAccountant(value_discretization_interval=1e-2).compose(event).get_epsilon(1e-6)
    assert coarse == pytest.approx(reference, rel=1e-12) and coarse > fine
    ledger = Ledger(accountant="pld", pld_discretization=1e-2)
    ledger.spend(DpGuarantee(event), "laplace")
    assert ledger.epsilon(1e-6) == pytest.approx(coarse, rel=1e-12)
    assert Ledger.from_dict(ledger.to_dict()).epsilon(1e-6) == pytest.approx(coarse, rel=1e-12)
    with pytest.raises(AccountingError, match="discretisation"):
        Ledger(accountant="pld", pld_discretization=0.0)
    with pytest.raises(AccountingError, match="accountant='rdp'"):
        Ledger(pld_discretization=1e-3)


def test_calibration_accepts_orders():
    orders = [2.0, 4.0]
    sigma = calibrate_gaussian(1.0, 1e-5, steps=10, orders=orders)
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma), 10)
    assert RdpAccountant(orders=orders).compose(event).get_epsilon(1e-5) <= 1.0
    assert sigma > calibrate_gaussian(1.0, 1e-5, steps=10)  # two orders are a looser curve
    slightly_less = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma * 0.99), 10)
    assert RdpAccountant(orders=orders).compose(slightly_less).get_epsilon(1e-5) > 1.0
