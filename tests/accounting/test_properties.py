"""Hypothesis properties of the ledger: monotonicity, order, grouping, additivity, ceilings."""

import math

import dp_accounting
import pytest
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import DpGuarantee, Ledger, MetricDpGuarantee, dpsgd_event
from dpkit.base.errors import BudgetExceededError
from dpkit.testing.strategies_accounting import (
    deltas,
    dp_guarantees,
    etas,
    k_anonymity_guarantees,
    metric_guarantees,
    noise_multipliers,
    sampling_rates,
    spend_lists,
)

FAST = settings(max_examples=min(15, settings.default.max_examples), deadline=None)


def dp_epsilon(spends, delta=1e-5):
    ledger = Ledger(delta=delta)
    for g, label, count in spends:
        ledger.spend(g, label, count)
    return ledger.epsilon()


@FAST
@given(sigma=noise_multipliers, q=sampling_rates, steps=st.integers(1, 1000),
       more=st.integers(1, 1000), delta=deltas)
def test_epsilon_grows_with_steps(sigma, q, steps, more, delta):
    fewer = dp_epsilon([(DpGuarantee(dpsgd_event(sigma, q, steps)), "s", 1)], delta)
    assert dp_epsilon([(DpGuarantee(dpsgd_event(sigma, q, steps + more)), "s", 1)], delta) >= fewer


@FAST
@given(sigma=noise_multipliers, factor=st.floats(1.01, 4.0), q=sampling_rates,
       steps=st.integers(1, 1000))
def test_epsilon_shrinks_with_sigma(sigma, factor, q, steps):
    low = dp_epsilon([(DpGuarantee(dpsgd_event(sigma, q, steps)), "s", 1)])
    assert dp_epsilon([(DpGuarantee(dpsgd_event(sigma * factor, q, steps)), "s", 1)]) <= low


@FAST
@given(spends=spend_lists(dp_guarantees()), data=st.data())
def test_composition_order_does_not_matter(spends, data):
    shuffled = data.draw(st.permutations(spends))
    assert dp_epsilon(shuffled) == pytest.approx(dp_epsilon(spends), rel=1e-9)


@FAST
@given(spends=spend_lists(dp_guarantees()), repeat=st.integers(1, 4))
def test_grouped_equals_ungrouped_rdp(spends, repeat):
    raw = RdpAccountant()
    ledger = Ledger()
    for g, label, count in spends * repeat:
        ledger.spend(g, label, count)
        for _ in range(count):
            raw.compose(g.event)
    grouped = ledger.composed_accountant().get_epsilon(1e-5)
    assert grouped == pytest.approx(raw.get_epsilon(1e-5), rel=1e-9)
    assert ledger.epsilon() <= grouped * (1 + 1e-12)  # basic composition may be tighter still


def test_grouped_equals_ungrouped_pld():
    events = [dp_accounting.GaussianDpEvent(s) for s in (3.0, 5.0, 8.0)]
    ledger, raw = Ledger(accountant="pld"), dp_accounting.pld.PLDAccountant()
    for i in range(12):
        ledger.spend(DpGuarantee(events[i % 3]), f"release {i}")
        raw.compose(events[i % 3])
    assert ledger.epsilon() == pytest.approx(raw.get_epsilon(1e-5), rel=1e-6)


@FAST
@given(spends=spend_lists(metric_guarantees()), distances=st.lists(st.floats(0, 10), max_size=8))
def test_metric_dp_is_additive(spends, distances):
    ledger = Ledger()
    for g, label, count in spends:
        ledger.spend(g, label, count)
    for unit in {g.unit for g, _, _ in spends}:
        total = math.fsum(g.eta * count for g, _, count in spends if g.unit == unit)
        assert ledger.eta(unit=unit) == pytest.approx(total, rel=1e-12)
    per_document = math.fsum(g.eta for g, _, _ in spends)  # each spend is one pass over the data
    assert ledger.metric_epsilon(distances) == pytest.approx(per_document * sum(distances), rel=1e-9)


@FAST
@given(spends=spend_lists(k_anonymity_guarantees()))
def test_k_anonymity_min_k_summed_epsilon(spends):
    ledger = Ledger()
    for g, label, count in spends:
        ledger.spend(g, label, count)
    k = ledger.k_anonymity()
    assert k.k_achieved == min(g.k_achieved for g, _, _ in spends)
    assert k.epsilon == pytest.approx(sum(g.epsilon * c for g, _, c in spends), rel=1e-12)


def _fill(ledger, spends):
    for g, label, count in spends:
        ledger.spend(g, label, count)


@settings(max_examples=min(10, settings.default.max_examples), deadline=None)
@given(spends=spend_lists(dp_guarantees(), max_size=4))
def test_dp_ceiling_refuses_exactly_at_the_boundary(spends):
    prefix = [dp_epsilon(spends[:i + 1]) for i in range(len(spends))]
    _fill(Ledger(ceiling=prefix[-1]), spends)  # exactly on the boundary: all accepted
    cap = prefix[-1] * (1 - 1e-6)
    accepted = next(i for i, eps in enumerate(prefix) if eps > cap * (1 + 1e-9))
    tight = Ledger(ceiling=cap)
    with pytest.raises(BudgetExceededError, match="nothing was recorded"):
        _fill(tight, spends)
    assert len(tight) == accepted and tight.epsilon() <= cap


@FAST
@given(spends=spend_lists(st.builds(MetricDpGuarantee, eta=etas)))
def test_eta_ceiling_refuses_exactly_at_the_boundary(spends):
    total = math.fsum(g.eta * c for g, _, c in spends)
    _fill(Ledger(ceiling={"eta": total}), spends)
    tight = Ledger(ceiling={"eta": total * (1 - 1e-6)})
    with pytest.raises(BudgetExceededError, match="nothing was recorded"):
        _fill(tight, spends)
    assert len(tight) == len(spends) - 1
