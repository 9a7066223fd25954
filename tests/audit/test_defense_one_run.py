"""The one-run and repeated-runs ε lower bounds: published values, closed forms, validity."""

import math

import numpy as np
import pytest
from scipy import special, stats

from dpkit.audit.one_run import (
    clopper_pearson_epsilon,
    epsilon_from_scores,
    guess_grid,
    one_run_epsilon,
    one_run_p_value,
    one_run_reach,
    repeated_runs_epsilon,
)


def _deterministic_normal(mu: float, n: int) -> np.ndarray:
    """n scores at the mid-point quantiles of N(mu, 1), as jax_privacy's tests build them."""
    return stats.norm.ppf(np.linspace(0, 1, n, endpoint=False) + 1 / (2 * n)) + mu


def _naive_p_value(m, guesses, correct, eps, delta):
    """Steinke et al.'s p-value written out term by term (no vectorisation)."""
    q = special.expit(eps)
    beta = stats.binom.sf(correct - 1, guesses, q)
    alpha, acc = 0.0, 0.0
    for i in range(1, correct + 1):
        acc += stats.binom.pmf(correct - i, guesses, q)
        alpha = max(alpha, acc / i)
    return min(beta + alpha * delta * 2 * m, 1.0)


@pytest.mark.parametrize("m,guesses,wrong", [(10, 10, 0), (100, 10, 1), (1000, 100, 10),
                                             (1000, 100, 0), (100, 100, 40)])
@pytest.mark.parametrize("eps,delta", [(0.0, 0.0), (0.5, 1e-6), (1.0, 1e-3), (1.0, 0.1)])
def test_p_value_matches_term_by_term_formula(m, guesses, wrong, eps, delta):
    got = one_run_p_value(m, guesses, guesses - wrong, eps, delta)
    assert got == pytest.approx(_naive_p_value(m, guesses, guesses - wrong, eps, delta), abs=1e-12)


@pytest.mark.parametrize("r", [5, 50, 500])
def test_all_correct_at_delta_zero_has_closed_form(r):
    """δ = 0, r of r right: P = q^r, so the bound is logit(α^(1/r)) exactly."""
    expected = math.log(0.05 ** (1 / r) / (1 - 0.05 ** (1 / r)))
    assert one_run_epsilon(10 * r, r, r, 0.95, 0.0) == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("shift,expected", [(0, 0.0), (1, 1.13346), (2, 2.311945), (4, 4.395568)])
def test_hull_mode_reproduces_jax_privacy(shift, expected):
    """Expected values: jax_privacy tests/auditing_test.py, ``test_epsilon_one_run_close``
    (10 000 + 10 000 deterministic-normal scores, significance 0.05, δ = 1e-6)."""
    ins, outs = _deterministic_normal(shift, 10_000), _deterministic_normal(0, 10_000)
    got = epsilon_from_scores(ins, outs, 0.95, 1e-6, thresholds="hull").epsilon
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_grid_is_never_above_a_perfect_guesser():
    """Perfectly separated scores reach :func:`one_run_reach` and no more."""
    ins, outs = np.arange(500) + 1000.0, np.arange(500) * 1.0
    got = epsilon_from_scores(ins, outs, 0.95, 1e-5)
    assert got.correct == got.guesses > 0
    assert got.epsilon == pytest.approx(one_run_reach(1000, 0.95, 1e-5), rel=1e-6)


def test_guess_grid_is_fixed_by_m():
    assert list(guess_grid(2)) == [1]
    ks = guess_grid(1000)
    assert ks[0] == 1 and ks[-1] == 500 and len(ks) <= 16


def test_bound_holds_for_randomized_response_at_the_claimed_epsilon():
    """Worst case of ε-DP: each canary's guess right with probability e^ε/(1+e^ε). The bound
    exceeds ε in at most 5% of repetitions (here: far fewer)."""
    rng = np.random.default_rng(0)
    eps, m, reps, over = 1.0, 400, 200, 0
    for _ in range(reps):
        included = rng.random(m) < 0.5
        right = rng.random(m) < special.expit(eps)
        guess_in = np.where(right, included, ~included)
        scores = guess_in + rng.random(m) * 0.5
        bound = epsilon_from_scores(scores[included], scores[~included], 0.95, 0.0).epsilon
        over += bound > eps
    assert over / reps <= 0.05


def test_bound_grows_with_separation():
    weak = epsilon_from_scores(_deterministic_normal(1, 300), _deterministic_normal(0, 300), 0.95, 1e-5)
    strong = epsilon_from_scores(_deterministic_normal(3, 300), _deterministic_normal(0, 300), 0.95, 1e-5)
    assert 0 < weak.epsilon < strong.epsilon


def test_clopper_pearson_epsilon_by_hand():
    """TPR lower and FPR upper one-sided Clopper–Pearson bounds at α/2 each, as in Jagielski
    et al. 2020: 90 of 100 detected, 5 of 100 false alarms."""
    tpr_lb = stats.beta.ppf(0.025, 90, 11)
    fpr_ub = stats.beta.ppf(0.975, 6, 95)
    assert clopper_pearson_epsilon(90, 100, 5, 100, 0.95) == pytest.approx(
        math.log(tpr_lb / fpr_ub), rel=1e-9)
    assert clopper_pearson_epsilon(50, 100, 50, 100, 0.95) == 0.0


def test_repeated_runs_bound_below_the_true_gaussian_epsilon():
    """Scores of a Gaussian mechanism with μ = 2 (true ε at δ=1e-3 is 7.58 by dp_accounting's PLD): the bound is
    positive and below it."""
    rng = np.random.default_rng(1)
    ins, outs = rng.normal(2, 1, 2000), rng.normal(0, 1, 2000)
    got = repeated_runs_epsilon(ins, outs, 0.95, 1e-3)
    assert 0.5 < got.epsilon < 7.58


def test_scores_are_validated():
    with pytest.raises(ValueError, match="included and of excluded"):
        epsilon_from_scores([], [1.0], 0.95, 0.0)
    with pytest.raises(ValueError, match="finite"):
        epsilon_from_scores([np.inf], [1.0], 0.95, 0.0)


def test_tied_scores_carry_no_information():
    """Two-valued scores independent of the labels: ties are not broken by label."""
    rng = np.random.default_rng(3)
    scores = rng.random(1000) < 0.3
    included = rng.random(1000) < 0.5
    got = epsilon_from_scores(scores[included] * 1.0, scores[~included] * 1.0, 0.95, 1e-5)
    assert got.epsilon < 0.5
