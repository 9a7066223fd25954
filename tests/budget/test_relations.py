"""One cap whatever the relation: add/remove spends converted to replace-one by a valid theorem,
replace-one spends refused on an add/remove cap."""

import math

import dp_accounting
import numpy as np
import pytest

from dpkit.accounting import DpGuarantee, rdp_curve
from dpkit.base.errors import AccountingError
from dpkit.budget.filter import FILTER_ORDERS, filter_epsilon_by_relation
from dpkit.budget.relations import conversion_refusal, relation_curve


def renyi(p, q, alpha):
    terms = alpha * np.log(p) + (1 - alpha) * np.log(q)
    top = terms.max()
    return (top + math.log(float(np.sum(np.exp(terms - top))))) / (alpha - 1)


def test_the_weak_triangle_inequality_holds_on_random_distributions():
    """Mironov's Proposition 11 with p = q = 2, checked on 2,000 random triples; it is the step
    the add/remove → replace-one conversion rests on."""
    rng = np.random.default_rng(0)
    worst = -math.inf
    for _ in range(2000):
        p, q, r = (rng.dirichlet(np.full(4, 0.5)) + 1e-12 for _ in range(3))
        for alpha in (1.1, 2.0, 5.0, 20.0):
            lhs = renyi(p, r, alpha)
            rhs = (alpha - 0.5) / (alpha - 1) * renyi(p, q, 2 * alpha) + renyi(q, r, 2 * alpha - 1)
            worst = max(worst, lhs - rhs)
    assert math.isfinite(worst) and worst <= 1e-9


@pytest.mark.parametrize("sigma", [0.7, 2.0, 8.0])
def test_the_converted_gaussian_curve_bounds_the_exact_replace_one_curve(sigma):
    """A Gaussian of noise multiplier σ under add/remove is, under replace-one (sensitivity
    doubled), the Gaussian of multiplier σ/2 (RDP accountant): the conversion must lie above it,
    and within the factor (2α − ½)/(2α − 2) of it."""
    event = dp_accounting.GaussianDpEvent(sigma)
    converted = relation_curve(event, FILTER_ORDERS, "add_remove", "replace_one")
    exact = np.asarray(rdp_curve(dp_accounting.GaussianDpEvent(sigma / 2), FILTER_ORDERS,
                                 "add_remove"))
    ledger = np.asarray(rdp_curve(event, FILTER_ORDERS, "replace_one"))  # the ledger's own reading
    assert np.allclose(ledger, exact, rtol=1e-12)
    alphas = np.asarray(FILTER_ORDERS)
    assert np.all(converted >= exact * (1 - 1e-12))
    assert np.all(converted <= exact * (2 * alphas - 0.5) / (2 * alphas - 2) * (1 + 1e-9))


def test_pure_dp_doubles_and_the_wrong_direction_is_refused():
    pure = [(DpGuarantee.pure(1.5), 2)]
    assert filter_epsilon_by_relation({"add_remove": pure}, 1e-5, "replace_one") == 6.0
    assert filter_epsilon_by_relation({"replace_one": pure}, 1e-5, "replace_one") == 3.0
    with pytest.raises(AccountingError, match="says nothing about adding or removing"):
        filter_epsilon_by_relation({"replace_one": pure}, 1e-5, "add_remove")
    assert conversion_refusal("replace_special", "add_remove") is not None
    assert conversion_refusal("add_remove", "replace_one") is None
