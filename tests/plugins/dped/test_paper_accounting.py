"""DPED at the paper's accounting: σ from ε per query (not composed), the ledger at the composed ε
the queries really spend — never the per-query figure the paper would print."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.privacy import VOTES_SENSITIVITY, hidden_sensitivity, paper_plan

from dpkit.accounting import DpGuarantee, Ledger

from .conftest import TEACHER

DELTA = 1e-5
CLASSICAL = math.sqrt(2 * math.log(1.25 / DELTA))  # σ/Δ of the classical Gaussian mechanism at ε = 1


def ledger_epsilon(spends, accountant: str = "rdp") -> float:
    """ε of the planned spends recorded on a fresh ledger."""
    ledger = Ledger(DELTA, accountant)
    for guarantee, label, count in spends:
        ledger.spend(guarantee, label=label, count=count)
    return ledger.epsilon()


def plan(queries: int, per_query: float = 1.0, hidden: bool = True):
    return paper_plan(epsilon_per_query=per_query, delta=DELTA, accountant="rdp", queries=queries,
                      hidden_sens=hidden_sensitivity(1.0, 20) if hidden else 0.0, teachers=20,
                      clip=1.0, target="soft")


def test_sigma_is_the_papers_per_query_formula_with_its_sensitivities():
    p = plan(3000)
    assert p.sigma_votes == pytest.approx(CLASSICAL)  # Δ = 1 (the paper), not √2
    assert p.sigma_threshold == pytest.approx(CLASSICAL)
    assert p.sigma_hidden == pytest.approx(CLASSICAL * 1.0 / 20)  # C/N, not 2C/N
    assert plan(3000, per_query=4.0).sigma_votes == pytest.approx(CLASSICAL / 4)


def test_the_ledger_composes_the_true_sensitivities_over_every_query():
    """The 3,000 queries of the spec's row at ε = 1 per query cost ε ≈ 592 (≈ 515 for the votes and
    the hidden mean alone, the two releases the paper charges) — and the label says so."""
    p = plan(3000)
    eps = ledger_epsilon(p.spends())
    z = (1 / CLASSICAL**2 + 2 / CLASSICAL**2 + 4 / CLASSICAL**2) ** -0.5  # true Δ: 1, √2, 2C/N
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), 3000)
    assert eps == pytest.approx(acc.get_epsilon(DELTA), rel=1e-6)
    assert 585 < eps < 600
    without_threshold = dp_accounting.rdp.RdpAccountant()
    without_threshold.compose(dp_accounting.GaussianDpEvent((2 / CLASSICAL**2 + 4 / CLASSICAL**2)
                                                            ** -0.5), 3000)
    assert without_threshold.get_epsilon(DELTA) == pytest.approx(515, abs=1)
    for _, label, count in p.spends():
        assert f"ε = {eps:.4g}" in label and "per query" in label and count == 3000


@pytest.mark.parametrize("queries", [1, 30, 300, 3000])
def test_the_recorded_epsilon_never_states_the_per_query_figure_for_more_than_one_query(queries):
    """A ledger reading ε = 1 for many queries would be the paper's under-statement."""
    eps = ledger_epsilon(plan(queries).spends())
    assert eps > 1.0  # three releases of ε = 1 each per query, composed: more than 1 at once
    if queries > 1:
        assert eps > ledger_epsilon(plan(max(1, queries // 10)).spends())


def test_the_events_charge_the_true_sensitivity_not_the_papers():
    p = plan(10)
    multipliers = [ev.noise_multiplier for ev, _ in p.per_query_events()]
    assert multipliers == pytest.approx([CLASSICAL, CLASSICAL / VOTES_SENSITIVITY, CLASSICAL / 2])


def test_the_defense_plans_and_records_the_composed_spend():
    params = {**TEACHER, "accounting": "paper", "target_epsilon": 1.0, "num_queries": 24}
    privacy = type("P", (), {"delta": DELTA, "accountant": "rdp"})()
    for cls, releases in ((DpedDefense, 3), (DpedPate, 2)):
        spends = cls(cls.Params.model_validate(params)).planned_spends(privacy)
        assert len(spends) == releases and all(isinstance(g, DpGuarantee) for g, _, _ in spends)
        assert ledger_epsilon(spends) > 1.0
    composed = DpedDefense(DpedDefense.Params.model_validate({**params, "accounting": "composed"}))
    assert ledger_epsilon(composed.planned_spends(privacy)) <= 1.0 + 1e-9
