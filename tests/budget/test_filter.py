"""The privacy filter's admission rule: RDP with a union over its fixed orders, or basic
composition for pure spends; never below the non-adaptive bound it stands in for."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import DpGuarantee, KAnonymityGuarantee, MetricDpGuarantee, dpsgd_event
from dpkit.base.errors import AccountingError
from dpkit.budget.filter import FILTER_ORDERS, filter_epsilon, filter_epsilon_by_relation


def test_the_orders_are_fixed_and_match_dp_accountings_default():
    assert list(FILTER_ORDERS) == [float(a) for a in RdpAccountant()._orders]
    assert len(FILTER_ORDERS) == 156


def test_rdp_runs_pay_a_union_over_the_orders():
    sgd = DpGuarantee(dpsgd_event(1.0, 0.01, 1000))
    gauss = DpGuarantee(dp_accounting.GaussianDpEvent(5.0))
    spends = [(sgd, 2), (gauss, 3)]
    raw = RdpAccountant(orders=list(FILTER_ORDERS))
    raw.compose(sgd.event, 2).compose(gauss.event, 3)
    orders = np.asarray(FILTER_ORDERS)
    by_hand = float(np.min(raw._rdp + math.log(156 / 1e-6) / (orders - 1)))
    assert filter_epsilon(spends, 1e-6) == pytest.approx(by_hand, rel=1e-12)
    assert filter_epsilon(spends, 1e-6) > raw.get_epsilon(1e-6)  # the price of adaptivity
    assert filter_epsilon(list(reversed(spends)), 1e-6) == filter_epsilon(spends, 1e-6)


def test_pure_runs_are_filtered_by_basic_composition():
    spends = [(DpGuarantee.pure(4.0), 32)]
    assert filter_epsilon(spends, 1e-5) == 128.0
    small = [(DpGuarantee.pure(0.01), 10_000)]  # here the Rényi route is far tighter than Σε = 100
    assert filter_epsilon(small, 1e-5) < 20


def test_what_has_no_rdp_or_no_dp_bound_is_never_admitted_silently():
    approx = [(DpGuarantee.approximate(1.0, 1e-7), 2)]
    assert filter_epsilon(approx, 1e-5) == math.inf
    for g in (MetricDpGuarantee(1.0, "l2", "glove"), KAnonymityGuarantee(5, 5, 0.0, 1.0)):
        with pytest.raises(AccountingError, match="cannot be counted against an .* cap; refusing "
                                                  "rather than leaving it uncounted"):
            filter_epsilon([(g, 1)], 1e-5)
    assert filter_epsilon([], 1e-5) == 0.0


@pytest.mark.parametrize("delta", [0.0, 1.0, 1.5, -1e-5])
def test_a_delta_outside_the_open_unit_interval_is_refused(delta):
    with pytest.raises(AccountingError, match=r"a filter's δ must lie in \(0, 1\), got"):
        filter_epsilon([(DpGuarantee.pure(1.0), 1)], delta)


def test_pure_spends_of_every_relation_add_up_and_none_is_skipped():
    """Σ over relations of the converted ε (add/remove doubled on a replace-one cap); a relation
    whose spends all have count 0 is passed over, not the end of the sum."""
    spends = {"add_remove": [(DpGuarantee.pure(3.0), 0)],
              "replace_one": [(DpGuarantee.pure(4.0), 2)]}
    assert filter_epsilon_by_relation(spends, 1e-5, "replace_one") == 8.0
    spends["add_remove"] = [(DpGuarantee.pure(3.0), 1)]
    assert filter_epsilon_by_relation(spends, 1e-5, "replace_one") == 2 * 3.0 + 8.0
