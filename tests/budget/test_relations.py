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


@pytest.mark.parametrize("sigma", [0.7, 3.0])
def test_the_conversion_is_mironovs_bound_exactly(sigma):
    """For a Gaussian, ρ(α) = α/(2σ²), so (α − ½)/(α − 1)·ρ(2α) + ρ(2α − 1) = (2α − 1)²/((α − 1)·2σ²)."""
    alphas = np.asarray(FILTER_ORDERS)
    converted = relation_curve(dp_accounting.GaussianDpEvent(sigma), FILTER_ORDERS, "add_remove",
                               "replace_one")
    assert np.allclose(converted, (2 * alphas - 1) ** 2 / ((alphas - 1) * 2 * sigma**2), rtol=1e-12)


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_an_unconverted_curve_is_the_ledgers_own_at_the_orders_asked(relation):
    event = dp_accounting.GaussianDpEvent(1.3)  # its curve depends on the relation
    orders = [1.5, 2.0, 8.0, 40.0]
    assert list(relation_curve(event, orders, relation, relation)) == rdp_curve(event, orders,
                                                                                relation)


def test_a_pair_with_no_known_conversion_says_so():
    said = conversion_refusal("replace_special", "add_remove")
    assert said == ("its spends are stated for replace_special neighbours and the cap for "
                    "add_remove: dpkit knows no valid conversion from replace_special to "
                    "add_remove neighbours; state the spec's privacy in add_remove (privacy: "
                    "{neighboring: add_remove}) or cap the dataset in replace_special")
    with pytest.raises(AccountingError, match="no valid conversion from add_remove to "
                                              "replace_special"):
        relation_curve(dp_accounting.GaussianDpEvent(1.0), [2.0], "add_remove", "replace_special")
