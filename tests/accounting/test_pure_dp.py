"""Pure ε-DP guarantees: exact under PLD, never below the truth under RDP, randomized response."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpkit.accounting import (
    DpGuarantee,
    Ledger,
    guarantee_from_dict,
    guarantee_to_dict,
    pure_dp_rdp,
)
from dpkit.accounting.serialize import describe
from dpkit.base.errors import AccountingError


def rr_loss_law(epsilon: float, k: int) -> list[tuple[float, float]]:
    """(probability, privacy loss) of one k-ary randomized response at ε, x vs a replaced x'."""
    z = math.exp(epsilon) + k - 1
    law = [(math.exp(epsilon) / z, epsilon), (1 / z, -epsilon)]
    return law + ([((k - 2) / z, 0.0)] if k > 2 else [])


def exact_composed_delta(epsilon: float, k: int, n: int, target: float) -> float:
    """δ(target) of n-fold k-ary randomized response: E[(1 - e^{target - L})₊] over the loss law."""
    (p_own, _), (p_swap, _), *rest = rr_loss_law(epsilon, k)
    p_other = rest[0][0] if rest else 0.0
    total = []
    for own in range(n + 1):
        for swap in range(n + 1 - own):
            other = n - own - swap
            loss = epsilon * (own - swap)
            if loss <= target or (other and not p_other):
                continue
            log_p = (math.lgamma(n + 1) - math.lgamma(own + 1) - math.lgamma(swap + 1)
                     - math.lgamma(other + 1) + own * math.log(p_own) + swap * math.log(p_swap)
                     + (other * math.log(p_other) if other else 0.0))
            total.append(math.exp(log_p) * -math.expm1(target - loss))
    return math.fsum(total)


def exact_composed_epsilon(epsilon: float, k: int, n: int, delta: float) -> float:
    """Smallest ε_total with δ(ε_total) ≤ delta for n-fold k-ary randomized response (bisection)."""
    lo, hi = 0.0, n * epsilon
    if exact_composed_delta(epsilon, k, n, 0.0) <= delta:
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if exact_composed_delta(epsilon, k, n, mid) <= delta else (mid, hi)
    return hi


def ledger_epsilon(guarantee, n, accountant, delta, **settings):
    """ε of n spends of ``guarantee`` on a fresh ledger."""
    ledger = Ledger(delta=delta, accountant=accountant, **settings)
    ledger.spend(guarantee, "token", count=n)
    return ledger.epsilon()


@pytest.mark.parametrize(("epsilon", "n"), [(1.0, 10), (0.3, 40), (3.0, 5)])
def test_binary_randomized_response_is_exact_under_pld_and_bounded_under_rdp(epsilon, n):
    exact = exact_composed_epsilon(epsilon, 2, n, 1e-5)
    pld = ledger_epsilon(DpGuarantee.pure(epsilon), n, "pld", 1e-5)
    rdp = ledger_epsilon(DpGuarantee.pure(epsilon), n, "rdp", 1e-5)
    assert exact - 1e-9 <= pld <= exact + n * 2e-4  # pessimistic rounding: ≤ 1e-4 per loss atom
    assert rdp >= exact - 1e-9
    laplace = ledger_epsilon(DpGuarantee(dp_accounting.LaplaceDpEvent(1 / epsilon)), n, "pld", 1e-5)
    assert laplace < exact  # Laplace's curve under-states a generic ε-DP mechanism


def test_issue_case_k_ary_randomized_response():
    """ε = 12, V = 20,000, 39 tokens: exact 468.0; Laplace's curve said 462.2."""
    exact = exact_composed_epsilon(12.0, 20_000, 39, 1e-5)
    pld = ledger_epsilon(DpGuarantee.pure(12.0), 39, "pld", 1e-5)
    rdp = ledger_epsilon(DpGuarantee.pure(12.0), 39, "rdp", 1e-5)
    assert pld == pytest.approx(exact, abs=39 * 1e-4) and pld >= exact - 1e-9
    assert rdp >= exact - 1e-9
    laplace = ledger_epsilon(DpGuarantee(dp_accounting.LaplaceDpEvent(1 / 12)), 39, "pld", 1e-5)
    assert laplace < exact - 1


@pytest.mark.parametrize("k", [3, 10, 1000])
def test_k_ary_randomized_response_never_exceeds_the_pure_dp_worst_case(k):
    epsilon, n = 1.0, 20
    p = k / (math.exp(epsilon) + k - 1)  # dp-accounting's noise parameter for ε
    exact = exact_composed_epsilon(epsilon, k, n, 1e-6)
    rr = dp_accounting.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=k)
    as_rr = ledger_epsilon(DpGuarantee(rr), n, "pld", 1e-6, neighboring="replace_one")
    assert as_rr == pytest.approx(exact, abs=n * 2e-4)  # dp-accounting agrees with the direct sum
    for accountant in ("pld", "rdp"):
        assert ledger_epsilon(DpGuarantee.pure(epsilon), n, accountant, 1e-6) >= exact - 1e-9


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 2.0, 12.0])
def test_rdp_curve_is_binary_randomized_response(epsilon):
    p = 2 / (1 + math.exp(epsilon))
    for order in [1.01, 1.5, 2.0, 8.0, 64.0, 1024.0]:
        value = pure_dp_rdp(epsilon, order)
        reference = rdp_lib._randomized_response_rdp_replace_one(p, 2, order)
        assert value == pytest.approx(reference, rel=1e-9, abs=1e-12)
        assert value <= min(epsilon, order * epsilon**2 / 2) * (1 + 1e-12)
        for k in (3, 50):
            q = k / (math.exp(epsilon) + k - 1)
            assert value >= rdp_lib._randomized_response_rdp_replace_one(q, k, order) - 1e-12
    assert pure_dp_rdp(epsilon, math.inf) == epsilon
    assert pure_dp_rdp(epsilon, 1.0) == pytest.approx(epsilon * math.tanh(epsilon / 2))


def test_declared_relation_is_converted_or_refused():
    add_remove = DpGuarantee.pure(1.0, neighboring="add_remove")
    replace = ledger_epsilon(add_remove, 5, "pld", 1e-6, neighboring="replace_one")
    assert replace == pytest.approx(ledger_epsilon(DpGuarantee.pure(2.0), 5, "pld", 1e-6))
    with pytest.raises(AccountingError, match="replace_one neighbours"):
        Ledger().spend(DpGuarantee.pure(1.0, neighboring="replace_one"), "token")


def test_approximate_dp_composes_under_pld_only():
    guarantee = DpGuarantee.approximate(1.0, 1e-7)
    eps = ledger_epsilon(guarantee, 10, "pld", 1e-5)
    assert ledger_epsilon(DpGuarantee.pure(1.0), 10, "pld", 1e-5) <= eps
    with pytest.raises(AccountingError, match="no finite Rényi DP"):
        Ledger().spend(guarantee, "token")
    ledger = Ledger(accountant="pld")
    ledger.spend(guarantee, "token", count=10)
    assert ledger.delta(100.0) >= 1 - (1 - 1e-7) ** 10 - 1e-12  # δ never below the δ-atoms


def test_pure_guarantee_round_trips_and_reads_well():
    for g in (DpGuarantee.pure(0.5, "rr"), DpGuarantee.approximate(1.0, 1e-6, neighboring="replace_one")):
        assert guarantee_from_dict(guarantee_to_dict(g)) == g
    assert describe(DpGuarantee.pure(0.5)) == "ε-DP(ε=0.5)"
    with pytest.raises(ValueError, match="NoGuarantee"):
        DpGuarantee.pure(np.inf)
