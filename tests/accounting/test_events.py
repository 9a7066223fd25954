"""The dp-accounting bridge: accountants built as asked, exact grouping, refusals that say why."""

import json
import math

import attr
import dp_accounting
import numpy as np
import pytest
from dp_accounting import NeighboringRelation
from dp_accounting.dp_event import MixtureOfGaussiansDpEvent
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import DpGuarantee, Ledger
from dpkit.accounting import events as ev
from dpkit.accounting.pure import ApproxDpEvent
from dpkit.base.errors import AccountingError

GAUSS = dp_accounting.GaussianDpEvent(1.5)
RR = dp_accounting.RandomizedResponseDpEvent(noise_parameter=0.3, num_buckets=5)
REPLACE = NeighboringRelation.REPLACE_ONE
# dp-accounting's RDP reads a Gaussian the same under every relation; dpkit's charges it, under
# replace-one, at the replacement's sensitivity (twice the add/remove one), as dp-accounting's PLD
REPLACED_GAUSS = dp_accounting.GaussianDpEvent(0.75)


@attr.s(frozen=True, auto_attribs=True)
class Tagged(dp_accounting.DpEvent):
    """An event with a field of any type (unhashable ones make the event unhashable)."""

    value: object


@attr.s(frozen=True, auto_attribs=True)
class Bundle(dp_accounting.DpEvent):
    """Another event type with the same single field as Tagged."""

    value: object


def mixture(sensitivities, probs=None) -> MixtureOfGaussiansDpEvent:
    """An unhashable event (it holds sequences) with the given sensitivities."""
    probs = probs if probs is not None else [1 / len(sensitivities)] * len(sensitivities)
    return MixtureOfGaussiansDpEvent(1.0, sensitivities, probs)


def n_groups(*events) -> int:
    return len(ev.group_events([(e, 1) for e in events]))


def test_accountants_are_dp_accountings_with_the_settings_asked_for():
    event = dp_accounting.SelfComposedDpEvent(GAUSS, 3)
    cases = [
        (dict(), RdpAccountant()),
        (dict(orders=(2.0, 4.0)), RdpAccountant(orders=[2.0, 4.0])),
        (dict(neighboring="replace_one"), None),
        (dict(name="pld"), PLDAccountant()),
        (dict(name="pld", discretization=1e-2), PLDAccountant(value_discretization_interval=1e-2)),
        (dict(name="pld", neighboring="replace_one"), PLDAccountant(REPLACE)),
    ]
    for kwargs, reference in cases:
        ours = ev.make_accountant(**kwargs).compose(event).get_epsilon(1e-5)
        if reference is None:  # RDP under replace-one: the Gaussian at the doubled sensitivity
            reference, event_read = RdpAccountant(), dp_accounting.SelfComposedDpEvent(
                REPLACED_GAUSS, 3)
        else:
            event_read = event
        expected = reference.compose(event_read).get_epsilon(1e-5)
        assert ours == pytest.approx(expected, rel=1e-12), kwargs
    assert ev.make_accountant(orders=(2.0, 4.0)).compose(event).rdp.tolist() \
        == RdpAccountant(orders=[2.0, 4.0]).compose(event).rdp.tolist()


def test_settings_of_the_other_accountant_are_refused():
    with pytest.raises(AccountingError, match="PLD discretisation interval was given but the "
                                              "accountant is 'rdp'"):
        ev.make_accountant("rdp", discretization=1e-3)
    with pytest.raises(AccountingError) as info:
        ev.make_accountant("pld", orders=[2.0])
    assert str(info.value) == ("RDP orders were given but the accountant is 'pld'; drop the orders "
                               "or use accountant='rdp'")
    with pytest.raises(AccountingError, match="RDP orders were given"):
        ev.epsilon_of(GAUSS, 1e-5, "pld", orders=[2.0])


def test_composed_accountant_matches_dp_accounting_for_every_setting():
    event = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 20)
    coarse = ev.composed_accountant(event, "pld", discretization=1e-2).get_epsilon(1e-6)
    reference = PLDAccountant(value_discretization_interval=1e-2).compose(event).get_epsilon(1e-6)
    assert coarse == pytest.approx(reference, rel=1e-12)
    rr = ev.composed_accountant(RR, "pld", neighboring="replace_one").get_epsilon(1e-6)
    assert rr == pytest.approx(PLDAccountant(REPLACE).compose(RR).get_epsilon(1e-6), rel=1e-12)
    orders = [1.5, 3.0]
    ours = ev.composed_accountant(GAUSS, orders=orders).get_epsilon(1e-5)
    assert ours == pytest.approx(RdpAccountant(orders=orders).compose(GAUSS).get_epsilon(1e-5),
                                 rel=1e-12)
    assert ev.composed_accountant(GAUSS).get_epsilon(1e-5) \
        == pytest.approx(RdpAccountant().compose(GAUSS).get_epsilon(1e-5), rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_epsilon_and_delta_of_are_dp_accountings(accountant):
    reference = {"rdp": RdpAccountant().compose(REPLACED_GAUSS),
                 "pld": PLDAccountant(REPLACE).compose(GAUSS)}[accountant]
    for delta in (0.0, 1e-5):
        assert ev.epsilon_of(GAUSS, delta, accountant, neighboring="replace_one") \
            == pytest.approx(reference.get_epsilon(delta), rel=1e-12)
    for epsilon in (0.0, 1.0):
        assert ev.delta_of(GAUSS, epsilon, accountant, neighboring="replace_one") \
            == pytest.approx(reference.get_delta(epsilon), rel=1e-12)
    default = {"rdp": RdpAccountant(), "pld": PLDAccountant()}[accountant].compose(GAUSS)
    assert ev.delta_of(GAUSS, 1.0, accountant) == pytest.approx(default.get_delta(1.0), rel=1e-12)


def test_epsilon_and_delta_of_default_to_rdp_and_take_its_orders_and_pld_discretisation():
    assert ev.epsilon_of(GAUSS, 1e-5) == pytest.approx(
        RdpAccountant().compose(GAUSS).get_epsilon(1e-5), rel=1e-12)
    assert ev.delta_of(GAUSS, 1.0) == pytest.approx(RdpAccountant().compose(GAUSS).get_delta(1.0),
                                                    rel=1e-12)
    orders = [1.5, 3.0]
    rdp = RdpAccountant(orders=orders).compose(GAUSS)
    assert ev.epsilon_of(GAUSS, 1e-5, orders=orders) == pytest.approx(rdp.get_epsilon(1e-5),
                                                                      rel=1e-12)
    assert ev.delta_of(GAUSS, 1.0, orders=orders) == pytest.approx(rdp.get_delta(1.0), rel=1e-12)
    laplace = dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(1.0), 20)
    coarse = PLDAccountant(value_discretization_interval=1e-2).compose(laplace)
    assert ev.epsilon_of(laplace, 1e-6, "pld", discretization=1e-2) \
        == pytest.approx(coarse.get_epsilon(1e-6), rel=1e-12)
    assert ev.delta_of(laplace, 10.0, "pld", discretization=1e-2) \
        == pytest.approx(coarse.get_delta(10.0), rel=1e-12)
    assert coarse.get_delta(10.0) != PLDAccountant().compose(laplace).get_delta(10.0)


def test_epsilon_and_delta_of_refuse_values_outside_their_range():
    for delta in (1.0, -1e-9, math.nan):
        with pytest.raises(AccountingError, match=r"delta must lie in \[0, 1\), got"):
            ev.epsilon_of(GAUSS, delta)
    for epsilon in (-1.0, math.nan):
        with pytest.raises(AccountingError, match="epsilon must be ≥ 0, got"):
            ev.delta_of(GAUSS, epsilon)


def test_rdp_curve_follows_the_relation():
    orders = [2.0, 8.0]
    reference = RdpAccountant(orders=orders, neighboring_relation=REPLACE).compose(RR)
    assert ev.rdp_curve(RR, orders, "replace_one") == pytest.approx(reference.rdp.tolist(),
                                                                    rel=1e-12)
    assert ev.rdp_curve(GAUSS, orders) == pytest.approx([o / (2 * 1.5**2) for o in orders])


def test_groups_form_exactly_when_events_are_equal():
    first = mixture([1.0, 2.0])
    assert n_groups(first, mixture([1.0, 2.0])) == 1  # equal lists, built twice
    assert n_groups(first, mixture([1.0, 3.0])) == 2
    assert n_groups(first, mixture((1.0, 2.0), (0.5, 0.5))) == 2  # a tuple is not equal to a list
    parsed = [float(x) for x in "1.5 2.5".split()]  # equal floats, distinct objects
    assert n_groups(mixture(parsed), mixture([float(x) for x in "1.5 2.5".split()])) == 1
    nested = [dp_accounting.ComposedDpEvent([mixture([1.0, 2.0]), GAUSS]) for _ in range(2)]
    assert n_groups(*nested) == 1
    assert n_groups(nested[0], dp_accounting.ComposedDpEvent([mixture([1.0, 3.0]), GAUSS])) == 2
    assert n_groups(Tagged([[1.0]]), Tagged([(1.0,)])) == 2  # a list inside is not a tuple
    assert n_groups(Tagged([[1.0]]), Tagged([[1.0]])) == 1
    assert n_groups(Tagged([1.0]), Bundle([1.0])) == 2  # another event type
    assert n_groups(Tagged({"a": 1.0, "b": [2.0]}), Tagged({"b": [2.0], "a": 1.0})) == 1
    assert n_groups(Tagged({"a": 1.0}), Tagged({"a": 2.0})) == 2
    assert n_groups(Tagged({"a": 1.0}), Tagged({"b": 1.0})) == 2


def test_arrays_group_by_dtype_shape_and_every_element():
    base = np.arange(6, dtype=np.float64)
    assert n_groups(Tagged([base]), Tagged([base.copy()])) == 1
    assert n_groups(Tagged([base]), Tagged([base.astype(np.float32)])) == 2
    assert n_groups(Tagged([base]), Tagged([base.reshape(2, 3)])) == 2
    changed = base.copy()
    changed[3] = 7.0
    assert n_groups(Tagged([base]), Tagged([changed])) == 2


def test_nan_never_merges_and_unhashable_fields_are_never_merged():
    nans = [float("nan"), float("nan")]
    assert n_groups(mixture([nans[0], 1.0]), mixture([nans[1], 1.0])) == 2
    assert n_groups(Tagged([{1}]), Tagged([{2}])) == 2  # a set has no exact form: kept apart


def test_group_events_sums_counts_in_first_seen_order_and_drops_zero():
    laplace = dp_accounting.LaplaceDpEvent(1.0)
    groups = ev.group_events([(GAUSS, 2), (laplace, 0), (mixture([1.0]), 1),
                              (dp_accounting.GaussianDpEvent(1.5), 3), (mixture([1.0]), 4)])
    assert groups == [(GAUSS, 5), (mixture([1.0]), 5)]
    assert ev.group_events([(laplace, 0)]) == []
    with pytest.raises(AccountingError, match="a spend count must be ≥ 0, got -1"):
        ev.group_events([(GAUSS, -1)])


def test_composed_event_composes_each_group_count_times():
    laplace = dp_accounting.LaplaceDpEvent(2.0)
    assert ev.composed_event([]) == dp_accounting.NoOpDpEvent()
    assert ev.composed_event([(GAUSS, 1)]) == GAUSS
    assert ev.composed_event([(GAUSS, 3)]) == dp_accounting.SelfComposedDpEvent(GAUSS, 3)
    event = ev.composed_event([(GAUSS, 3), (laplace, 1)])
    assert event == dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(GAUSS, 3),
                                                   laplace])
    reference = RdpAccountant().compose(GAUSS, 3).compose(laplace).get_epsilon(1e-5)
    assert ev.epsilon_of(event, 1e-5) == pytest.approx(reference, rel=1e-12)


def test_supports_names_what_each_accountant_composes():
    approx = ApproxDpEvent(1.0, 1e-6)
    assert ev.supports(GAUSS) and ev.supports(GAUSS, "pld")
    assert ev.supports(approx, "pld") and not ev.supports(approx)
    assert ev.supports(RR, "pld", "replace_one") and not ev.supports(RR, "pld")
    assert not ev.supports(dp_accounting.ZCDpEvent(0.5), "pld")
    with pytest.raises(AccountingError, match="unknown accountant"):
        ev.supports(GAUSS, "moments")


def test_support_is_a_dry_run_that_composes_nothing_and_ignores_rdp_orders(monkeypatch):
    built = []
    original = pld_lib.from_gaussian_mechanism
    monkeypatch.setattr(pld_lib, "from_gaussian_mechanism",
                        lambda *a, **k: built.append(1) or original(*a, **k))
    ev.check_supported(GAUSS, "pld", orders=[2.0])  # the orders are the RDP accountant's
    assert ev.supports(GAUSS, "pld")
    assert built == []


def test_check_supported_says_which_accountant_can():
    ev.check_supported(GAUSS)
    ev.check_supported(RR, "pld", neighboring="replace_one")
    with pytest.raises(AccountingError) as info:
        ev.check_supported(ApproxDpEvent(1.0, 1e-6))
    message = str(info.value)
    assert message.startswith("the RDP accountant (add_remove neighbours) cannot compose "
                              "ApproxDpEvent(")
    assert "no finite Rényi DP" in message and "(at ApproxDpEvent(" in message
    assert message.endswith("; the PLD accountant can: use accountant='pld'")
    with pytest.raises(AccountingError) as info:
        ev.check_supported(dp_accounting.ZCDpEvent(0.5), "pld", what="calibration")
    message = str(info.value)
    assert message.startswith("calibration: the PLD accountant (add_remove neighbours) cannot "
                              "compose ZCDpEvent(")
    assert message.endswith("; the RDP accountant can: use accountant='rdp'")


def test_check_supported_when_neither_accountant_can():
    with pytest.raises(AccountingError) as info:
        ev.check_supported(RR, "pld", what="spend 'rr'")
    message = str(info.value)
    assert message.startswith("spend 'rr': the PLD accountant (add_remove neighbours) cannot "
                              "compose RandomizedResponseDpEvent(")
    assert "; the RDP accountant cannot either: " in message
    assert "(replace_one, replace_special), or record NoGuarantee with a reason" in message
    assert "DpGuarantee.pure(ε)" in message
    with pytest.raises(AccountingError, match="unknown accountant 'moments'"):
        ev.check_supported(GAUSS, "moments", neighboring="swap")


def test_dpsgd_event_is_the_plain_event_when_nothing_is_sampled_or_repeated():
    assert ev.dpsgd_event(2.0, 1.0, 1) == dp_accounting.GaussianDpEvent(2.0)
    sampled = dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(2.0))
    assert ev.dpsgd_event(2.0, 0.5, 1) == sampled
    assert ev.dpsgd_event(2.0, 0.5, 7) == dp_accounting.SelfComposedDpEvent(sampled, 7)


def test_dpsgd_event_from_numpy_steps_is_recorded_as_json():
    event = ev.dpsgd_event(2.0, 0.5, np.int64(7))
    assert type(event.count) is int
    ledger = Ledger()
    ledger.spend(DpGuarantee(event), "train")
    again = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert again.epsilon() == ledger.epsilon()


@pytest.mark.parametrize("args, match", [
    ((0.0, 0.5, 1), "noise multiplier must be > 0, got 0.0"),
    ((1.0, 0.0, 1), r"sampling rate must lie in \(0, 1\], got 0.0"),
    ((1.0, 1.01, 1), r"sampling rate must lie in \(0, 1\], got 1.01"),
    ((1.0, 0.5, 0), "steps must be ≥ 1, got 0"),
])
def test_dpsgd_event_refuses_bad_arguments(args, match):
    with pytest.raises(AccountingError, match=match):
        ev.dpsgd_event(*args)
