"""Releasing the best of several runs: Papernot & Steinke's published bounds through dpkit, the
repetitions they assume, and what a fixed grid is charged."""

import math

import dp_accounting
import numpy as np
import pytest

from dpkit.accounting import DpGuarantee, Ledger, composed_accountant, pure_dp_rdp
from dpkit.base.errors import AccountingError
from dpkit.budget import best_of_random_runs, draw_repetitions, release_best_ledger, repeat_and_select

PURE_LIMIT = [1e10]  # one huge Rényi order: the RDP there is the pure-DP ε


def rdp_of(event, orders):
    return list(composed_accountant(event, "rdp", orders).rdp)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.0])
@pytest.mark.parametrize(("distribution", "shape"), [("logarithmic", 0), ("geometric", 1), (2.0, 2)])
def test_corollary_3_pure_runs_cost_two_plus_shape_times_epsilon(epsilon, distribution, shape):
    """Corollary 3: an ε-DP run repeated K ~ TNB(η) times is (2 + η)ε-DP — geometric: Liu and
    Talwar's 3ε (STOC 2019), logarithmic: 2ε — whatever the mean number of runs."""
    for run in (DpGuarantee.pure(epsilon).event, dp_accounting.LaplaceDpEvent(1 / epsilon)):
        for mean in (10, 1000):
            search = repeat_and_select(run, mean, distribution)
            assert rdp_of(search, PURE_LIMIT)[0] == pytest.approx((2 + shape) * epsilon, rel=1e-6)


@pytest.mark.parametrize("shape", [0.0, 1.0, 3.0])
@pytest.mark.parametrize(("rho", "mean"), [(0.05, 10.0), (0.2, 50.0)])
def test_corollary_4_gaussian_runs(rho, mean, shape):
    """Corollary 4: a ρ-zCDP (Gaussian) run repeated K ~ TNB(η, γ) times has, at λ ≤ 1 + √(log μ/ρ),
    ε′ = 2√(ρ log μ) + 2(1 + η)√(ρ log(1/γ)) − ηρ, and above it ρ(λ − 1) + log μ/(λ − 1) + the
    same constant (for ρ ≤ log(1/γ), with λ̂ = √(log(1/γ)/ρ) on the grid)."""
    from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

    gamma = _gamma_truncated_negative_binomial(shape, mean)
    true_mean = dp_accounting.rdp.rdp_privacy_accountant._truncated_negative_binomial_mean(
        gamma, shape)
    assert rho <= -math.log(gamma)
    knee = 1 + math.sqrt(math.log(true_mean) / rho)
    orders = sorted([1.5, 2.0, math.sqrt(-math.log(gamma) / rho), knee, 4.0, 8.0, 32.0])
    run = dp_accounting.GaussianDpEvent(math.sqrt(0.5 / rho))
    got = rdp_of(repeat_and_select(run, mean, shape), orders)
    constant = 2 * (1 + shape) * math.sqrt(-rho * math.log(gamma)) - shape * rho
    for order, value in zip(orders, got):
        if order <= knee:
            expected = 2 * math.sqrt(rho * math.log(true_mean)) + constant
        else:
            expected = rho * (order - 1) + math.log(true_mean) / (order - 1) + constant
        assert value == pytest.approx(expected, rel=1e-6), order


@pytest.mark.parametrize(("epsilon", "mean"), [(0.5, 10), (1.0, 100), (2.0, 1000)])
def test_theorem_6_poisson_runs_of_a_pure_mechanism(epsilon, mean):
    """Theorem 6 (K ~ Poisson(μ)) for an ε-DP run at λ = 1 + 1/(e^ε − 1), where δ̂ = 0:
    ε′ = ρ(λ) + (e^ε − 1)·log μ, ρ(λ) the run's own Rényi DP (binary randomized response)."""
    order = 1 + 1 / math.expm1(epsilon)
    got = rdp_of(repeat_and_select(DpGuarantee.pure(epsilon).event, mean), [order, 1e10])[0]
    expected = pure_dp_rdp(epsilon, order) + math.expm1(epsilon) * math.log(mean)
    assert got == pytest.approx(expected, rel=1e-3)


def test_the_search_costs_more_than_one_run_and_less_than_all():
    run = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    one = dp_accounting.SelfComposedDpEvent(run, 1000)
    single = best_of_random_runs(one, 1.0, 1e-5, "geometric")
    search = best_of_random_runs(one, 20.0, 1e-5, "geometric")
    every = Ledger()
    every.spend(DpGuarantee(one), "run", count=20)
    assert single < search < every.epsilon()


def test_repetitions_are_drawn_as_the_bound_assumes():
    rng = np.random.default_rng(0)
    for distribution in ("poisson", "geometric", "logarithmic", 2.0):
        draws = np.array([draw_repetitions(10.0, distribution, rng) for _ in range(20_000)])
        assert abs(draws.mean() - 10.0) < 5 * draws.std() / math.sqrt(len(draws)), distribution
        assert draws.min() >= (0 if distribution == "poisson" else 1)
    with pytest.raises(AccountingError, match="mean number of repetitions"):
        repeat_and_select(DpGuarantee.pure(1.0).event, 0.5)
    with pytest.raises(AccountingError, match="unknown distribution"):
        draw_repetitions(10.0, "uniform", rng)


def candidates():
    ledger = Ledger()
    for eps in (0.5, 1.0, 2.0):
        ledger.spend(DpGuarantee.pure(eps), f"cell ε={eps}")
    return ledger


def test_a_fixed_grid_is_charged_every_candidate():
    """Choosing depends on every candidate, so a fixed grid never costs less than all of them."""
    assert release_best_ledger(candidates(), "none", None) is None
    public = release_best_ledger(candidates(), "public", "accuracy")
    assert public.epsilon() == candidates().epsilon() == 3.5
    scored = release_best_ledger(candidates(), "private", "accuracy", score_in_ledger=True)
    assert scored.epsilon() == 3.5


def test_a_private_score_without_noise_has_no_guarantee():
    chosen = release_best_ledger(candidates(), "private", "accuracy")
    assert chosen.epsilon() == math.inf
    assert "without noise" in chosen.no_guarantee_reasons[0]
    with pytest.raises(AccountingError, match="unknown selection"):
        release_best_ledger(candidates(), "oracle", "accuracy")


def small_k_law(mean: float, distribution: str | float, k: int) -> float:
    """P[K = k] of the repetitions the bound analyses (the accountant's γ; Poisson: Poisson(mean))."""
    from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

    if distribution == "poisson":
        return math.exp(-mean) * mean ** k / math.factorial(k)
    shape = {"logarithmic": 0.0, "geometric": 1.0}.get(distribution, distribution)
    gamma = _gamma_truncated_negative_binomial(shape, mean)

    return truncated_negative_binomial_law(shape, 1 - gamma, 5000)[k - 1]


def truncated_negative_binomial_law(shape: float, q: float, support: int) -> list[float]:
    """P[K = k] ∝ C(k + η - 1, k) q^k (η = 0: q^k / k) for k = 1 … ``support``, normalised there."""
    def weight(j: int) -> float:
        if shape == 0:
            return q ** j / j
        return math.exp(math.lgamma(j + shape) - math.lgamma(shape) - math.lgamma(j + 1)
                        + j * math.log(q))

    weights = [weight(j) for j in range(1, support + 1)]
    total = sum(weights)
    return [w / total for w in weights]


@pytest.mark.parametrize("distribution", ["poisson", "geometric", "logarithmic", 2.0, 0.0, 1, 0.5])
def test_small_numbers_of_repetitions_are_drawn_as_often_as_the_bound_assumes(distribution):
    rng = np.random.default_rng(1)
    draws = np.array([draw_repetitions(4.0, distribution, rng) for _ in range(4000)])
    for k in (0, 1, 2):
        p = small_k_law(4.0, distribution, k) if k or distribution == "poisson" else 0.0
        assert abs((draws == k).mean() - p) <= 5 * math.sqrt(p * (1 - p) / len(draws)) + 1e-12, k


@pytest.mark.parametrize("shape", [-0.5, math.nan])
def test_a_shape_below_zero_or_not_a_number_is_refused(shape):
    with pytest.raises(AccountingError, match=r"the shape of the repetitions must be ≥ 0, got"):
        repeat_and_select(DpGuarantee.pure(1.0).event, 10.0, shape)
    with pytest.raises(AccountingError, match="shape of the repetitions"):
        draw_repetitions(10.0, shape, np.random.default_rng(0))


@pytest.mark.parametrize("mean", [0.5, math.inf, math.nan])
def test_a_mean_below_one_or_not_finite_is_refused(mean):
    with pytest.raises(AccountingError, match=r"the mean number of repetitions must be a finite "
                                              r"number ≥ 1, got"):
        repeat_and_select(DpGuarantee.pure(1.0).event, mean, "geometric")


@pytest.mark.parametrize("mean", [0.5, math.nan])
def test_drawing_with_a_mean_below_one_is_refused(mean):
    with pytest.raises(AccountingError, match=r"the mean number of repetitions must be ≥ 1, got"):
        draw_repetitions(mean, "poisson", np.random.default_rng(0))


def test_the_event_is_dp_accountings_with_the_mean_and_shape_it_was_given():
    run = DpGuarantee.pure(1.0).event
    for distribution, shape in (("logarithmic", 0.0), ("geometric", 1.0), ("poisson", math.inf),
                                (2, 2.0)):
        event = repeat_and_select(run, 7, distribution)
        assert (event.event, event.mean, event.shape) == (run, 7.0, shape)
        assert type(event.mean) is float and type(event.shape) is float


def test_the_search_is_composed_at_the_given_delta_and_orders():
    run = dp_accounting.GaussianDpEvent(2.0)
    search = repeat_and_select(run, 10.0, "geometric")
    orders = [2.0, 4.0, 8.0, 16.0]
    expected = composed_accountant(search, "rdp", orders).get_epsilon(1e-6)
    assert best_of_random_runs(run, 10.0, 1e-6, "geometric", orders) == expected
    assert best_of_random_runs(run, 10.0, 1e-3, "geometric", orders) < expected
    assert best_of_random_runs(run, 10.0, 1e-6) == best_of_random_runs(run, 10.0, 1e-6, "poisson")


def test_the_chosen_ledger_is_composed_as_the_candidates_are():
    """The candidates' δ, accountant and relation, every spend with its label and count."""
    grid = Ledger(delta=1e-7, accountant="pld", neighboring="replace_one")
    grid.spend(DpGuarantee(dp_accounting.GaussianDpEvent(3.0)), "cell a", count=4)
    grid.spend(DpGuarantee.pure(0.25), "cell b", count=2)
    for selection in ("public", "private"):
        chosen = release_best_ledger(grid, selection, "accuracy", score_in_ledger=True)
        assert (chosen.delta_target, chosen.accountant, chosen.neighboring) == (1e-7, "pld",
                                                                                "replace_one")
        assert chosen.spends == grid.spends
        assert chosen.epsilon() == grid.epsilon()


def test_a_private_unnoised_choice_is_recorded_with_its_metric_and_the_missing_bound():
    chosen = release_best_ledger(candidates(), "private", "accuracy")
    assert chosen.spends[:-1] == candidates().spends and chosen.spends[-1].label == "selection"
    (reason,) = chosen.no_guarantee_reasons
    assert reason == ("the best cell is chosen by 'accuracy' on private data without noise; no DP "
                      "bound covers that choice (Papernot & Steinke's needs a DP score and a "
                      "random number of runs)")
    with pytest.raises(AccountingError, match="unknown selection 'oracle'; use one of none, "
                                              "public, private"):
        release_best_ledger(candidates(), "oracle", "accuracy")
    with pytest.raises(AccountingError, match="unknown distribution 'uniform'; use one of "
                                              "logarithmic, geometric, poisson or a shape η ≥ 0"):
        repeat_and_select(DpGuarantee.pure(1.0).event, 10.0, "uniform")


def test_a_mean_of_one_repetition_draws_one_at_once():
    """At mean 1 the truncated law is K = 1 (γ = 1 for the geometric): drawing the untruncated law
    until K ≥ 1 looped for ever there, and for as long as 1/(1 - γ^η) draws near it."""
    rng = np.random.default_rng(3)
    for distribution in ("geometric", "logarithmic", 2.0, 0.5):
        assert [draw_repetitions(1.0, distribution, rng) for _ in range(20)] == [1] * 20
    assert draw_repetitions(1.0 + 1e-12, 3.0, rng) == 1


class FixedUniform:
    """A generator whose uniform draw is ``u``: the inverse CDF read at one point."""

    def __init__(self, u: float):
        self.u = u

    def random(self) -> float:
        return self.u


def test_the_draw_is_the_first_k_whose_cdf_reaches_the_uniform():
    """Inverse-CDF sampling: K ≤ k exactly when u ≤ F(k). The geometric law of mean 2 has q = 1/2
    and F(k) = 1 - 2^-k, exact in binary, so at u = F(k) the draw is k and just above it k + 1."""
    assert draw_repetitions(2.0, "geometric", FixedUniform(0.0)) == 1
    for k in range(1, 30):
        at_cdf = 1 - 2.0 ** -k
        assert draw_repetitions(2.0, "geometric", FixedUniform(at_cdf)) == k
        assert draw_repetitions(2.0, "geometric", FixedUniform(math.nextafter(at_cdf, 1))) == k + 1


@pytest.mark.timeout(20)
@pytest.mark.parametrize("mean", [3.0, 10.0, 100.0])
@pytest.mark.parametrize("shape", [0.5, 1.0, 2.0, 3.0])
def test_the_largest_uniform_draws_a_far_tail_k_and_ends(mean, shape):
    """u = 1 - 2^-53, the largest a generator's random() returns: the running CDF converges a few
    ulps short of u there (by rounding) and the draw ended only once a term underflowed to 0, which
    for q > 1/2 never happens (a subnormal term times q rounds back to itself): it hung."""
    from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

    k = draw_repetitions(mean, shape, FixedUniform(1 - 2.0 ** -53))
    law = truncated_negative_binomial_law(shape, 1 - _gamma_truncated_negative_binomial(shape, mean),
                                          20_000)
    assert sum(law[:k]) >= 1 - 1e-12  # as far in the tail as the uniform: P[K > k] ≤ 1e-12
    assert law[k - 1] > 0  # and not past where the law's terms underflow
