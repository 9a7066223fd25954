"""The ledger's guard: called with every spend before it is recorded; a refusal records nothing."""

import pytest

from dpkit.accounting import DpGuarantee, Ledger, NoGuarantee, Spend
from dpkit.accounting.ledger import active_guard, guarding
from dpkit.base.errors import AccountingError, BudgetExceededError


def test_the_guard_sees_each_spend_before_it_is_recorded():
    seen = []
    ledger = Ledger()
    ledger.guard = lambda spend: seen.append((spend, len(ledger)))
    ledger.spend(DpGuarantee.pure(0.5), "a", 3)
    assert seen == [(Spend(DpGuarantee.pure(0.5), "a", 3), 0)]  # called while the ledger was empty


def test_a_refusing_guard_leaves_the_ledger_unchanged():
    def refuse_unbounded(spend: Spend) -> None:
        if isinstance(spend.guarantee, NoGuarantee):
            raise BudgetExceededError("no")

    ledger = Ledger(guard=refuse_unbounded)
    ledger.spend(DpGuarantee.pure(1.0), "fine")
    with pytest.raises(BudgetExceededError):
        ledger.spend(NoGuarantee("raw text"), "leak")
    assert [s.label for s in ledger.spends] == ["fine"] and ledger.epsilon() == 1.0


def test_the_ceiling_refuses_before_the_guard_is_charged():
    charged = []
    ledger = Ledger(ceiling=1.0, guard=charged.append)
    with pytest.raises(BudgetExceededError):
        ledger.spend(DpGuarantee.pure(2.0), "too much")
    assert charged == [] and len(ledger) == 0


def test_guarding_scopes_the_active_guard():
    assert active_guard() is None
    with guarding(print):
        assert active_guard() is print
        with guarding(None):
            assert active_guard() is None
    assert active_guard() is None
    assert Ledger().guard is None  # a ledger takes a guard only when given one


def test_a_set_guard_is_neither_replaced_nor_removed():
    """Adversarial: a plug-in holding the cell's ledger cannot stop the budget store's charge."""
    seen = []

    def runners(spend: Spend) -> None:
        seen.append(spend.label)

    ledger = Ledger()
    ledger.guard = None  # nothing set yet: nothing to keep
    ledger.guard = runners
    ledger.guard = runners  # the same guard again changes nothing
    for other in (None, lambda spend: None):
        with pytest.raises(AccountingError, match="cannot be replaced or removed"):
            ledger.guard = other
    assert ledger.guard is runners
    ledger.spend(DpGuarantee.pure(0.1), "after")
    assert seen == ["after"]
