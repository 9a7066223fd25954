"""The runner's plan-vs-run check: a finished cell's ledger against its plan."""

import dp_accounting

from dpkit.accounting import DpGuarantee, Ledger, NoGuarantee
from dpkit.release.declaration import Release
from dpkit.runner.plan_check import EQUAL, NOT_PLANNED, check_plan
from dpkit.testing.boundary import recording_wire

GAUSSIAN = DpGuarantee(dp_accounting.GaussianDpEvent(2.0))
PRIVACY = type("Privacy", (), {"delta": 1e-5, "accountant": "rdp"})


class Planned:
    """Plans ten Gaussian queries from its params."""

    def planned_spends(self, privacy):
        return [(GAUSSIAN, "query", 10)]


class Declares:
    """Declares one row release of three rows."""

    def releases(self, ctx):
        return [Release("rows", GAUSSIAN, "rows", 3)]


def test_a_planning_component_is_checked_against_its_planned_spends():
    ledger = Ledger()
    ledger.spend(GAUSSIAN, "query", 10)
    assert check_plan(Planned(), PRIVACY, ledger, declared=1) == EQUAL
    ledger.spend(GAUSSIAN, "query", 10)
    assert check_plan(Planned(), PRIVACY, ledger, declared=1).startswith("differs from the plan")


def test_a_declaring_component_is_checked_against_what_it_declared_before_running():
    import torch

    wire, _ = recording_wire(*Declares().releases(None))
    ledger = wire.ledger
    declared = len(ledger.spends)
    wire.send("rows", torch.zeros(3, 2))
    wire.close()
    assert check_plan(Declares(), PRIVACY, ledger, declared) == EQUAL
    again, _ = recording_wire(*Declares().releases(None))
    ledger = again.ledger
    again.send("rows", torch.zeros(5, 2))  # two rows beyond the declaration
    again.close()
    check = check_plan(Declares(), PRIVACY, ledger, declared)
    assert "rows (over declaration) ×1" in check and "planned but not recorded []" in check


def test_a_component_that_plans_nothing_is_not_planned():
    ledger = Ledger()
    ledger.spend(NoGuarantee("anything"), "x", 1)
    assert check_plan(object(), PRIVACY, ledger, declared=0) == NOT_PLANNED
