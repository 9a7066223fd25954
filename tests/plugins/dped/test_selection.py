"""Which student is kept: held-out losses against unbiased targets, and a gain over the start that
chance cannot explain — so that no private student ends above its own start."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped.selection import gain_test, row_output_losses
from dpkit_dped.skipgram import WordModel
from dpkit_dped.student import train_student
from dpkit_dped.targets import nonnegative
from hypothesis import given, settings
from hypothesis import strategies as st

V, D = 40, 6


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["cross_entropy", "squared"]))
def test_held_out_losses_against_noisy_targets_are_unbiased_for_the_noiseless_ones(seed, kind):
    g = torch.Generator().manual_seed(seed)
    logits_a, logits_b = torch.randn(2, 3, 8, generator=g, dtype=torch.float64)
    truth = torch.rand(3, 8, generator=g, dtype=torch.float64)
    truth = truth / truth.sum(-1, keepdim=True)
    noise = torch.randn(20_000, 3, 8, generator=g, dtype=torch.float64) * 0.5
    noisy = truth + torch.cat([noise, -noise])  # antithetic: the noise averages to exactly 0

    def gap(targets):  # what stopping compares: one model's loss minus another's
        return row_output_losses(logits_a.expand_as(targets), targets, kind) - row_output_losses(
            logits_b.expand_as(targets), targets, kind)

    torch.testing.assert_close(gap(noisy).mean(0), gap(truth), rtol=1e-9, atol=1e-9)


def test_row_losses_match_the_training_losses_on_labels_and_distributions():
    g = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(5, 7, generator=g), torch.randint(0, 7, (5,), generator=g)
    probs = torch.softmax(torch.randn(5, 7, generator=g), -1)
    ce = torch.nn.functional.cross_entropy
    torch.testing.assert_close(row_output_losses(logits, labels, "cross_entropy").mean(), ce(logits, labels))
    torch.testing.assert_close(row_output_losses(logits, probs, "cross_entropy").mean(), ce(logits, probs))
    with pytest.raises(ValueError, match="squared"):
        row_output_losses(logits, labels, "hinge")


def test_the_gain_test_needs_a_gain_beyond_chance_and_pays_for_every_epoch_it_compared():
    g = torch.Generator().manual_seed(1)
    start = torch.randn(200, generator=g) + 5
    clear = gain_test(start, start - 0.5 + 0.1 * torch.randn(200, generator=g), best_step=3,
                      compared=10, level=0.05)
    assert clear.significant and clear.gain == pytest.approx(0.5, abs=0.05)
    luck = start - 0.02 + torch.randn(200, generator=g)  # tiny gain under large spread
    alone = gain_test(start, luck, best_step=3, compared=1, level=0.5)
    corrected = gain_test(start, luck, best_step=3, compared=10, level=0.5)
    assert corrected.p_value == pytest.approx(min(1.0, 10 * alone.p_value))
    assert not gain_test(start[:1], start[:1] - 9, best_step=1, compared=1, level=0.05).significant
    assert "keeping the start" in gain_test(start, start + 1, best_step=1, compared=1,
                                            level=0.05).describe()


def test_a_gain_most_rows_share_is_significant_even_when_one_row_dominates_the_mean():
    # the noiseless DPED student of 20 Newsgroups, seed 0: 248 of 249 held-out rows improved a
    # little and one row a lot; a t-test of the mean (p ≈ 0.1 before correction) kept the start
    g = torch.Generator().manual_seed(2)
    start = torch.rand(249, generator=g, dtype=torch.float64) * 0.002 + 0.001
    best = start * 0.1
    start[0], best[0] = 0.35, 0.005
    test = gain_test(start, best, best_step=9, compared=12, level=0.05)
    assert test.significant and test.p_value < 1e-10
    assert test.gain == pytest.approx(float((start - best).mean()))


def test_symmetric_noise_around_no_gain_is_not_significant_and_a_mean_loss_never_is():
    g = torch.Generator().manual_seed(3)
    start = torch.rand(400, generator=g, dtype=torch.float64)
    kept = 0
    for _ in range(200):
        noise = torch.randn(400, generator=g, dtype=torch.float64) * 0.1
        kept += gain_test(start, start + noise, best_step=1, compared=1, level=0.05).significant
    assert kept <= 20  # ≈ 5 % under the null (binomial 200 × 0.05 exceeds 20 with p ≈ 0.001)
    # most rows better but the mean worse: the start stays
    worse = start - 0.001
    worse[:5] += 1.0
    assert not gain_test(start, worse, best_step=1, compared=1, level=0.05).significant


def _setting(seed: int):
    """A public start near the teachers, the teachers' true distributions, and a query set."""
    g = torch.Generator().manual_seed(seed)
    vectors, out = torch.randn(V, D, generator=g), torch.randn(V, D, generator=g)
    start = WordModel(vectors, out + 0.3 * torch.randn(V, D, generator=g), torch.zeros(V))
    truth = torch.softmax(vectors @ out.T, dim=-1)
    ids = torch.arange(V).repeat(3)
    return start, truth, ids, g


def _true_loss(model: WordModel, truth: torch.Tensor) -> float:
    """Cross-entropy of the model's context distributions against the teachers' true ones."""
    return float(row_output_losses(model.context_logits(torch.arange(V)), truth, "cross_entropy").mean())


def _student(start, ids, targets, held, level, g):
    return train_student(ids, None, targets, vocab_size=V, dim=D, epochs=40, lr=0.05,
                         batch_size=16, hidden_weight=0.0, loss_kind="cross_entropy",
                         generator=g, init=start, patience=3, holdout_share=0.3,
                         held_targets=held, keep_start_level=level)


@pytest.mark.parametrize("seed", range(4))
def test_a_student_on_noise_dominated_targets_never_ends_above_its_start(seed):
    start, truth, ids, g = _setting(seed)
    noisy = truth[ids] + 0.2 * torch.randn(len(ids), V, generator=g)  # noise ≫ a 1/40 probability
    student = _student(start, ids, nonnegative(noisy), noisy, 0.05, g)
    assert _true_loss(student, truth) <= _true_loss(start, truth) + 1e-6
    # the old rule — stopping on the nonnegative targets themselves, no test — leaves the start
    # for a flatter model that is further from the teachers
    naive = _student(start, ids, nonnegative(noisy), None, None, torch.Generator().manual_seed(seed))
    assert naive.curve.best_step > 0 and _true_loss(naive, truth) > _true_loss(start, truth)


def test_a_student_on_clean_targets_still_learns_them():
    start, truth, ids, g = _setting(7)
    student = _student(start, ids, truth[ids], truth[ids], 0.05, g)
    assert student.selection.significant and student.curve.best_step > 0
    assert _true_loss(student, truth) < _true_loss(start, truth) - 0.01
