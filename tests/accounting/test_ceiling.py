"""The ceiling's arithmetic: which cap a spend counts against, on the cap is within it, and
what is left never below zero."""

import math

import pytest

from dpkit.accounting import DpGuarantee, KAnonymityGuarantee, Ledger, MetricDpGuarantee, NoGuarantee
from dpkit.accounting.ceiling import Ceiling, Usage
from dpkit.base.errors import AccountingError, BudgetExceededError


@pytest.mark.parametrize("name", ["epsilon", "eta", "anonymity_epsilon"])
@pytest.mark.parametrize("value", [math.nan, -1e-12, -math.inf])
def test_a_cap_that_is_not_a_number_at_least_zero_is_refused(name, value):
    with pytest.raises(AccountingError, match=rf"ceiling {name} must be ≥ 0, got"):
        Ceiling(**{name: value})


def test_a_ceiling_of_zero_admits_only_what_costs_nothing():
    ledger = Ledger(ceiling={"anonymity_epsilon": 0.0})
    ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 0.0), "weights", count=4)
    with pytest.raises(BudgetExceededError, match=r"above the ceiling \(k, ε\) ε = 0; remaining "
                                                  r"\(k, ε\) ε = 0; nothing was recorded"):
        ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 1e-12), "more")


def test_a_total_already_past_a_lowered_cap_leaves_zero_not_a_negative_remainder():
    ceiling = Ceiling(epsilon=1.0)
    assert ceiling.remaining({"epsilon": 1.5, "eta": 3.0, "anonymity_epsilon": 0.0}) == {
        "epsilon": 0.0, "eta": math.inf, "anonymity_epsilon": math.inf}
    with pytest.raises(BudgetExceededError, match="remaining ε = 0; nothing was recorded"):
        ceiling.check("spend 'x'", Usage("epsilon", 1.5, 1.6, "would bring ε to 1.6"))
    Ceiling(eta=1.0).check("spend 'x'", Usage("epsilon", 1.5, 1e9, "would bring ε to 1e9"))


def test_an_unbounded_spend_is_refused_naming_every_cap():
    with pytest.raises(BudgetExceededError, match=r"^spend 'x' has no valid guarantee, so ε = ∞; "
                                                  r"a ledger with a ceiling \(epsilon ≤ 1, "
                                                  r"anonymity_epsilon ≤ 0.5\) refuses it; nothing "
                                                  r"was recorded$"):
        Ceiling(epsilon=1.0, anonymity_epsilon=0.5).refuse_unbounded("spend 'x'")


def test_each_spend_counts_against_its_own_notions_cap_and_no_other():
    spends = {"epsilon": DpGuarantee.pure(1.0), "eta": MetricDpGuarantee(1.0),
              "anonymity_epsilon": KAnonymityGuarantee(5, 5, 0.0, 1.0)}
    for name, g in spends.items():
        assert Ceiling(**{name: 1.0}).governs(g) == name
        others = Ceiling(**{other: 1.0 for other in spends if other != name})
        assert others.governs(g) is None
    assert Ceiling(epsilon=1.0).governs(NoGuarantee("no noise")) is None


@pytest.mark.parametrize("value", [True, "1.0", [1.0]])
def test_a_ceiling_that_is_not_a_number_or_a_mapping_is_refused(value):
    with pytest.raises(AccountingError, match="ceiling must be a number, a mapping or None, got"):
        Ceiling.coerce(value)


def test_an_unknown_cap_name_is_refused_naming_the_known_ones():
    with pytest.raises(AccountingError, match=r"unknown ceiling keys \['delta'\]; use epsilon, eta, "
                                              r"anonymity_epsilon$"):
        Ceiling.coerce({"epsilon": 1.0, "delta": 1e-5})
