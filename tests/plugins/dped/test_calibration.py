"""The calibrated perplexity: one output bias per model, fitted by maximum likelihood, removes what a
model gets wrong about unigram frequencies and nothing it knows about contexts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dpkit_dped.calibration import (
    Margins,
    calibrated_perplexities,
    count_mismatch,
    center_log_probs,
    fit_output_bias,
    heldout_perplexity,
    mixture_log_probs,
    pair_margins,
    recovered_share,
    window_margins,
)
from dpkit_dped.corpus import skipgram_pairs
from dpkit_dped.skipgram import WordModel
from hypothesis import given, settings
from hypothesis import strategies as hs

V, D = 12, 4


def _model(seed: int, bias: torch.Tensor | None = None) -> WordModel:
    g = torch.Generator().manual_seed(seed)
    return WordModel(torch.randn(V, D, generator=g), torch.randn(V, D, generator=g), bias)


def _pairs(seed: int, n: int = 4000) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs drawn from a context law with structure (each center prefers three contexts) and a
    skewed unigram frequency."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.multinomial(torch.linspace(1, 6, V), n, replacement=True, generator=g)
    law = torch.full((V, V), 0.2)
    for w in range(V):
        law[w, [(w + 1) % V, (w + 2) % V, (w + 5) % V]] = 4.0
    law = law * torch.linspace(3, 0.5, V)  # contexts of skewed frequency
    contexts = torch.multinomial(law[centers], 1, generator=g).squeeze(1)
    return centers, contexts


def _likelihood(log_probs: torch.Tensor, margins: Margins, bias: torch.Tensor) -> float:
    n, m = margins.centers, margins.contexts
    return float((n * torch.logsumexp(log_probs + bias, -1)).sum() - (m * bias).sum())


def test_the_fit_matches_every_context_count_and_is_the_likelihood_optimum():
    log_probs = center_log_probs(_model(0))
    margins = pair_margins(*_pairs(1), V)
    bias = fit_output_bias(log_probs, margins, tolerance=1e-7)
    expected = margins.centers @ (log_probs + bias).softmax(-1)
    target = (margins.contexts + 0.5) * margins.pairs / (margins.pairs + 0.5 * V)
    torch.testing.assert_close(expected, target, rtol=1e-4, atol=0)
    best = _likelihood(log_probs, Margins(margins.centers, target), bias)
    g = torch.Generator().manual_seed(3)
    for _ in range(20):  # no nearby bias does better (the objective is convex)
        moved = bias + 0.05 * torch.randn(V, generator=g, dtype=torch.float64)
        assert _likelihood(log_probs, Margins(margins.centers, target), moved) >= best - 1e-9


@settings(max_examples=25, deadline=None)
@given(hs.integers(0, 10_000), hs.floats(-8, 8))
def test_a_model_that_differs_only_by_an_output_bias_gets_the_same_calibrated_score(seed, scale):
    """Whatever a model believes about unigram frequencies, calibration replaces it: adding any
    per-context offset to its logits changes the raw perplexity, not the calibrated one."""
    offset = scale * torch.randn(V, generator=torch.Generator().manual_seed(seed))
    plain, shifted = _model(seed % 7), _model(seed % 7, offset)
    heldout, margins = _pairs(seed + 1, 1000), pair_margins(*_pairs(seed + 2), V)
    scores = []
    for model in (plain, shifted):
        log_probs = center_log_probs(model)
        bias = fit_output_bias(log_probs, margins, tolerance=1e-8)
        scores.append(heldout_perplexity(log_probs, *heldout, bias))
    assert scores[0] == pytest.approx(scores[1], rel=1e-6)


def test_knowing_only_unigrams_scores_the_same_whatever_unigrams_a_model_guessed():
    """A model whose every center predicts one distribution carries no context knowledge: after
    calibration a right and a badly wrong unigram guess score the same — the unigram perplexity
    of the calibration sample."""
    centers, contexts = _pairs(4)
    heldout, margins = _pairs(5), pair_margins(centers, contexts, V)
    frequencies = torch.bincount(contexts, minlength=V).double() + 0.5
    for guess in (frequencies.log(), -3 * frequencies.log(), torch.zeros(V, dtype=torch.float64)):
        log_probs = guess.log_softmax(-1).expand(V, V)
        score = heldout_perplexity(log_probs, *heldout, fit_output_bias(log_probs, margins))
        unigram = heldout_perplexity(frequencies.log().log_softmax(-1).expand(V, V), *heldout)
        assert score == pytest.approx(unigram, rel=1e-4)


def test_calibration_cannot_lift_a_context_blind_model_above_one_that_knows_contexts():
    centers, contexts = _pairs(6, 20_000)
    counts = torch.zeros(V, V, dtype=torch.float64).index_put_((centers, contexts),
                                                              torch.ones(len(centers), dtype=torch.float64),
                                                              accumulate=True)
    knows = (counts + 0.5).log().log_softmax(-1)  # the empirical conditional law, no unigram bias
    knows = knows - knows.mean(0)  # strip its unigram knowledge before calibrating
    blind = torch.zeros(V, V, dtype=torch.float64).log_softmax(-1)
    heldout, margins = _pairs(7), pair_margins(centers, contexts, V)
    score = {name: heldout_perplexity(lp, *heldout, fit_output_bias(lp, margins))
             for name, lp in (("knows", knows), ("blind", blind))}
    assert score["knows"] < 0.9 * score["blind"], score


def test_window_margins_count_exactly_the_pairs_skipgram_pairs_enumerates():
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, V, size=int(rng.integers(1, 30))) for _ in range(40)]
    centers, contexts = skipgram_pairs(docs, 3, 10**9, rng)
    direct, counted = window_margins(docs, 3, V), pair_margins(centers, contexts, V)
    torch.testing.assert_close(direct.centers, counted.centers)
    torch.testing.assert_close(direct.contexts, counted.contexts)


def test_raw_heldout_perplexity_is_the_full_softmax_perplexity():
    from dpkit_dped.evaluation import perplexity

    model, (c, x) = _model(8), _pairs(9, 500)
    assert heldout_perplexity(center_log_probs(model), c, x) == pytest.approx(
        perplexity(model, c, x), rel=1e-5)


def test_the_mixture_of_identical_models_is_the_model_and_a_mixture_is_no_worse_than_its_worst():
    a, b = _model(10), _model(11)
    torch.testing.assert_close(mixture_log_probs([a, a, a]), center_log_probs(a))
    c, x = _pairs(12, 2000)
    mixed = heldout_perplexity(mixture_log_probs([a, b]), c, x)
    assert mixed <= max(heldout_perplexity(center_log_probs(m), c, x) for m in (a, b))


def test_a_model_without_a_proper_distribution_is_refused():
    log_probs = center_log_probs(_model(13))
    log_probs[0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_output_bias(log_probs, pair_margins(*_pairs(14), V))


@pytest.mark.parametrize("sharpness", [1.0, 30.0, 300.0])
def test_even_a_collapsed_model_is_fitted_to_the_tolerance(sharpness):
    """Alg. 1's hard-label students put almost all mass on one hub word (log-probabilities down to
    −700): the fit must still match every context count."""
    g = torch.Generator().manual_seed(15)
    logits = sharpness * torch.randn(V, V, generator=g, dtype=torch.float64)
    logits[:, 0] += 2 * sharpness  # a hub word
    log_probs = logits.log_softmax(-1)
    margins = pair_margins(*_pairs(16), V)
    bias = fit_output_bias(log_probs, margins)
    assert count_mismatch(log_probs, margins, bias) < 1e-4
    scores = calibrated_perplexities(log_probs, _pairs(17, 500), {"a": margins})
    assert scores["calibration_mismatch"] < 1e-4 and math.isfinite(scores["a"])


def test_the_recovered_share_is_zero_at_the_floor_one_at_the_ceiling_and_undefined_without_a_gain():
    assert recovered_share(400.0, 400.0, 350.0) == 0.0
    assert recovered_share(400.0, 350.0, 350.0) == 1.0
    assert recovered_share(400.0, 360.0, 350.0) == pytest.approx(0.8)
    assert recovered_share(400.0, 410.0, 350.0) < 0  # worse than the start
    assert math.isnan(recovered_share(350.0, 340.0, 360.0))
