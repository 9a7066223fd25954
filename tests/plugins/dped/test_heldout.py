"""Held-out answers: Gaussian data fission gives two independent halves; fold-in scores a held-out
word after fitting its vector with the output layer frozen."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped.heldout import fission, fit_vectors, fold_in_losses
from dpkit_dped.selection import row_output_losses

V, D = 30, 4


def test_fission_halves_are_independent_unbiased_and_twice_as_noisy():
    g = torch.Generator().manual_seed(0)
    truth = torch.softmax(torch.randn(V, generator=g), dim=0).expand(20_000, V)
    noisy = truth + 0.05 * torch.randn(truth.shape, generator=g)
    f, h = fission(noisy, 0.05, torch.Generator().manual_seed(1))
    for half in (f, h):
        assert (half - truth).mean().abs() < 1e-3
        assert (half - truth).std() == pytest.approx(0.05 * 2 ** 0.5, rel=0.01)
    # independent: the halves' noises do not correlate (jointly Gaussian, so uncorrelated is enough)
    corr = torch.corrcoef(torch.stack([(f - truth).flatten(), (h - truth).flatten()]))[0, 1]
    assert abs(float(corr)) < 0.01
    # the answer itself correlates with both (the check above would catch a half that ignored it)
    assert float(torch.corrcoef(torch.stack([(noisy - truth).flatten(),
                                             (h - truth).flatten()]))[0, 1]) > 0.6


def test_without_noise_both_halves_are_the_answer():
    answer = torch.rand(5, V)
    f, h = fission(answer, 0.0, torch.Generator().manual_seed(2))
    assert torch.equal(f, answer) and torch.equal(h, answer)


def _truth(seed: int):
    g = torch.Generator().manual_seed(seed)
    out, bias, vectors = torch.randn(V, D, generator=g), torch.zeros(V), torch.randn(12, D, generator=g)
    return out, bias, vectors, torch.softmax(vectors @ out.T, dim=-1)


def test_fold_in_scores_a_new_word_as_if_it_had_trained():
    """With the output layer that generated the answers, fold-in from a stale vector recovers them
    (cross-entropy near their entropy), where the stale vector scores far worse."""
    out, bias, vectors, answers = _truth(3)
    stale = torch.zeros_like(vectors)
    entropy = row_output_losses(torch.log(answers), answers, "cross_entropy")
    folded = fold_in_losses(out, bias, stale, answers, answers, loss_kind="cross_entropy",
                            output_weight=1.0, steps=50)
    at_stale = row_output_losses(stale @ out.T + bias, answers, "cross_entropy")
    assert float((folded - entropy).max()) < 0.02
    assert float((at_stale - entropy).min()) > 0.1


def test_fold_in_changes_neither_the_output_layer_nor_the_start():
    out, bias, vectors, answers = _truth(4)
    copies = [t.clone() for t in (out, bias, vectors)]
    fold_in_losses(out, bias, vectors, answers, answers, loss_kind="cross_entropy",
                   output_weight=1.0)
    assert all(torch.equal(a, b) for a, b in zip((out, bias, vectors), copies))


def test_fitting_several_answers_of_one_word_uses_all_of_them_and_the_hidden_term():
    out, bias, vectors, answers = _truth(5)
    rows = torch.tensor([0, 0, 1])  # word 0 answered twice
    targets = answers[[0, 1, 2]]
    fitted = fit_vectors(out, bias, torch.zeros(2, D), rows, targets, loss_kind="cross_entropy",
                         output_weight=1.0, steps=50)
    both = row_output_losses(fitted[0].expand(2, D) @ out.T, targets[:2], "cross_entropy").sum()
    for only in (fit_vectors(out, bias, torch.zeros(1, D), torch.tensor([0]), targets[:1],
                             loss_kind="cross_entropy", output_weight=1.0, steps=50),):
        alone = row_output_losses(only.expand(2, D) @ out.T, targets[:2], "cross_entropy").sum()
        assert both <= alone + 1e-4  # the joint fit is optimal for the word's two answers
    pulled = fit_vectors(out, bias, torch.zeros(2, D), rows, targets, loss_kind="cross_entropy",
                         output_weight=1.0, hidden=torch.full((3, D), 5.0),
                         hidden_mask=torch.tensor([True, True, False]), hidden_weight=100.0)
    assert torch.allclose(pulled[0], torch.full((D,), 5.0), atol=0.05)  # the hidden term dominates
    assert not torch.allclose(pulled[1], torch.full((D,), 5.0), atol=0.5)  # masked out for word 1
