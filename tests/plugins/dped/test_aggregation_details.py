"""DPED's aggregation in detail: clipping only outside the ball, Procrustes an orthogonal map onto
the reference, votes that never name the query word, the faithful threshold compared without
noise, what each target releases, refusals with their reasons. Kills the mutants of
dpkit_dped/aggregation.py the law tests cannot see (tools/mutation.toml)."""

from __future__ import annotations

import pytest
import torch

from dpkit_dped.aggregation import (
    Aggregate,
    aggregate,
    clip_rows,
    procrustes_align,
    teacher_probability_sum,
    teacher_votes,
    vote_histogram,
)
from dpkit_dped.privacy import NoisePlan
from dpkit_dped.skipgram import WordModel


def test_clip_rows_scales_only_rows_outside_the_ball_on_the_last_axis():
    x = torch.tensor([[[3.0, 4.0], [0.3, 0.4]], [[0.0, 0.0], [6.0, 8.0]]])
    out = clip_rows(x, 1.0)
    assert torch.allclose(out.norm(dim=-1), torch.tensor([[1.0, 0.5], [0.0, 1.0]]))
    assert torch.equal(out[0, 1], x[0, 1]) and torch.equal(out[1, 0], x[1, 0])
    small = torch.tensor([[0.03, 0.04], [0.3, 0.4]])
    assert torch.allclose(clip_rows(small, 0.1).norm(dim=-1), torch.tensor([0.05, 0.1]))


def test_procrustes_undoes_a_rotation_and_keeps_norms():
    g = torch.Generator().manual_seed(0)
    reference = torch.randn(50, 4, generator=g)
    rotation, _ = torch.linalg.qr(torch.randn(4, 4, generator=g))
    source = 2.5 * reference @ rotation
    aligned = procrustes_align(source, reference)
    assert torch.allclose(aligned, 2.5 * reference, atol=1e-4)
    assert torch.allclose(aligned.norm(dim=1), source.norm(dim=1), atol=1e-4)


def test_votes_never_name_the_query_and_chunks_do_not_matter():
    g = torch.Generator().manual_seed(1)
    vectors = torch.randn(12, 3, generator=g)
    teachers = [WordModel(vectors, vectors.clone()) for _ in range(3)]  # self-similarity wins
    queries = torch.arange(12)
    votes = teacher_votes(teachers, queries, chunk=5)
    assert bool((votes != queries).all())
    assert torch.equal(votes, teacher_votes(teachers, queries, chunk=1024))
    logits = vectors @ vectors.T
    logits.fill_diagonal_(float("-inf"))
    assert torch.equal(votes[0], logits.argmax(1))
    hist = vote_histogram(torch.tensor([[1, 2], [1, 0], [1, 2]]), 4)
    assert hist.tolist() == [[0, 3, 0, 0], [1, 0, 2, 0]]



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_votes_sums_and_histograms_of_cuda_teachers_are_the_cpu_ones_on_their_device():
    g = torch.Generator().manual_seed(3)
    teachers = [WordModel(torch.randn(12, 3, generator=g), torch.randn(12, 3, generator=g))
                for _ in range(3)]
    queries = torch.arange(12)
    for t in teachers:  # the votes are clear-cut: no rounding of the GPU's matmul flips one
        logits = t.context_logits(queries)
        logits.fill_diagonal_(float("-inf"))
        assert float((logits.topk(2).values @ torch.tensor([1.0, -1.0])).min()) > 1e-3
    on_cuda = [WordModel(t.vectors.cuda(), t.out_vectors.cuda()) for t in teachers]
    votes = teacher_votes(on_cuda, queries.cuda(), chunk=5)
    summed = teacher_probability_sum(on_cuda, queries.cuda(), chunk=5)
    hist = vote_histogram(votes, 12)
    assert votes.device.type == summed.device.type == hist.device.type == "cuda"
    assert torch.equal(votes.cpu(), teacher_votes(teachers, queries, chunk=5))
    torch.testing.assert_close(summed.cpu(), teacher_probability_sum(teachers, queries, chunk=5),
                               atol=1e-3, rtol=1e-3)
    assert torch.equal(hist.cpu(), vote_histogram(votes.cpu(), 12))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_outputs_are_aggregated_on_their_device_with_the_cuda_generators_draws():
    """Threshold, vote and hidden noise are the CUDA generator's draws, in that order, on the
    teachers' device; so are the query ids."""
    g = torch.Generator().manual_seed(4)
    summed, vectors = 3 * torch.rand(6, 5, generator=g).cuda(), torch.randn(3, 6, 4, generator=g).cuda()
    plan = NoisePlan(queries=6, sigma_threshold=0.5, sigma_votes=0.7, sigma_hidden=0.3, target="soft")
    agg = aggregate(vectors, summed, plan, threshold=2.0, clip=1.0,
                    generator=torch.Generator(device="cuda").manual_seed(9))
    z = torch.Generator(device="cuda").manual_seed(9)
    top = summed.max(dim=-1).values + 0.5 * torch.randn(6, generator=z, device="cuda")
    noisy = summed + 0.7 * torch.randn(6, 5, generator=z, device="cuda")
    hidden = clip_rows(vectors, 1.0).mean(dim=0) + 0.3 * torch.randn(6, 4, generator=z, device="cuda")
    assert {t.device.type for t in (agg.queries, agg.answered, agg.hidden, agg.labels, agg.soft)} == {"cuda"}
    assert torch.equal(agg.queries.cpu(), torch.arange(6)) and torch.equal(agg.answered, top >= 2.0)
    assert torch.equal(agg.soft, noisy) and torch.equal(agg.labels, noisy.argmax(dim=-1))
    assert torch.equal(agg.hidden, hidden)

def test_abstain_share_is_the_share_not_answered():
    agg = Aggregate(torch.arange(4), torch.tensor([True, False, False, False]), None,
                    torch.zeros(4, dtype=torch.long))
    assert agg.abstain_share == pytest.approx(0.75)


def _summed():
    summed = torch.zeros(6, 5)
    summed[:, 2] = torch.tensor([1.0, 3.0, 5.0, 7.0, 9.0, 11.0])
    return summed


def test_faithful_threshold_compares_the_noiseless_top_count():
    plan = NoisePlan(queries=6, sigma_threshold=None, sigma_votes=1e-6, faithful=True, target="hard")
    agg = aggregate(None, _summed(), plan, threshold=5.0, clip=1.0,
                    generator=torch.Generator().manual_seed(0))
    assert agg.answered.tolist() == [False, False, True, True, True, True]
    assert agg.soft is None and agg.hidden is None and agg.labels.tolist() == [2] * 6
    assert torch.equal(agg.queries, torch.arange(6))


def test_soft_release_is_the_noisy_sum_and_its_argmax():
    plan = NoisePlan(queries=6, sigma_threshold=1e-6, sigma_votes=0.5, target="soft")
    agg = aggregate(None, _summed(), plan, threshold=6.0, clip=1.0,
                    generator=torch.Generator().manual_seed(0))
    assert agg.soft is not None and torch.equal(agg.labels, agg.soft.argmax(-1))
    assert agg.answered.tolist() == [False, False, False, True, True, True]


def test_hidden_release_is_the_clipped_mean_and_needs_its_sigma():
    vectors = torch.tensor([[[3.0, 4.0]], [[0.3, 0.4]]])          # two teachers, one query
    plan = NoisePlan(queries=1, sigma_threshold=1e-9, sigma_votes=1e-9, sigma_hidden=1e-9,
                     hidden_sens=1.0, target="hard")
    summed = torch.tensor([[2.0, 0.0]])
    agg = aggregate(vectors, summed, plan, threshold=1.0, clip=1.0,
                    generator=torch.Generator().manual_seed(0))
    assert torch.allclose(agg.hidden, torch.tensor([[0.45, 0.6]]), atol=1e-6)
    no_hidden = NoisePlan(queries=1, sigma_threshold=1.0, sigma_votes=1.0, target="hard")
    with pytest.raises(ValueError, match="^teacher vectors were given but the noise plan has no "
                                         "hidden-layer σ$"):
        aggregate(vectors, summed, no_hidden, threshold=1.0, clip=1.0, generator=torch.Generator())


def test_a_plan_without_threshold_noise_is_refused_unless_faithful():
    plan = NoisePlan(queries=1, sigma_threshold=None, sigma_votes=1.0, faithful=True)
    object.__setattr__(plan, "faithful", False)
    with pytest.raises(ValueError, match="^the plan has no threshold noise and is not the faithful "
                                         "threshold; refusing to compare the noiseless top count$"):
        aggregate(None, _summed(), plan, threshold=1.0, clip=1.0, generator=torch.Generator())


def test_one_teachers_probability_sum_is_its_own_distribution():
    g = torch.Generator().manual_seed(2)
    teacher = WordModel(torch.randn(9, 3, generator=g), torch.randn(9, 3, generator=g))
    queries = torch.tensor([4, 0, 8, 4])
    expected = teacher.context_logits(queries).softmax(-1)
    assert torch.allclose(teacher_probability_sum([teacher], queries, chunk=3), expected)


def test_every_draw_comes_from_the_given_generator():
    """Two runs from equally seeded generators release the same threshold decisions, sums and
    means whatever the global RNG holds; the threshold sits on every top count so each decision
    is the sign of its own draw."""
    g = torch.Generator().manual_seed(3)
    summed = torch.rand(400, 6, generator=g) * 4
    summed[:, 0] = 10.0
    vectors = torch.randn(3, 400, 4, generator=g)
    plan = NoisePlan(queries=400, sigma_threshold=2.0, sigma_votes=1.0, sigma_hidden=0.5,
                     hidden_sens=0.1, target="soft")
    runs = []
    with torch.random.fork_rng():
        for global_seed in (0, 1):
            torch.manual_seed(global_seed)
            runs.append(aggregate(vectors, summed, plan, threshold=10.0, clip=1.0,
                                  generator=torch.Generator().manual_seed(7)))
    a, b = runs
    assert 0 < int(a.answered.sum()) < 400
    assert torch.equal(a.answered, b.answered)
    assert torch.equal(a.soft, b.soft) and torch.equal(a.hidden, b.hidden)
