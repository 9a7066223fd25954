"""White-box laws of every noise draw of the DPED family, each with its power against a 1.5× scale
error computed by simulation (numpy, independent of the torch code under test):

* the aggregator's three draws (threshold, summed outputs, hidden mean) at a plan's σ;
* DP-SGD's Gaussian gradient noise (documents with no pairs: the released gradient is the noise);
* DP-SGD's Poisson sampling: batch sizes Binomial(n, q) at the q the ledger charges — a sampler
  that draws 10× (or 1.5×) more documents than the accountant assumes fails;
* the teachers' shards: disjoint, so one document moves one teacher.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from dpkit.audit.noise_law import gaussian_pvalue, simulated_power
from dpkit_dped.aggregation import aggregate, clip_rows
from dpkit_dped.audit import batch_size_p_value, charged_sampling_rate
from dpkit_dped.privacy import NoisePlan
from dpkit_dped.sgd import train_on_pairs

LEVEL = 1e-3
MIN_POWER = 0.95
SCALE = 1.5


def _gauss_power(n: int, sigma: float) -> float:
    """Power of gaussian_pvalue at n values against N(0, (1.5σ)²) and N(0, (σ/1.5)²)."""
    return min(simulated_power(lambda x: gaussian_pvalue(x, sigma),
                               lambda rng, f=f: rng.normal(0, sigma * f, n), LEVEL, 200)
               for f in (SCALE, 1 / SCALE))


def _plan() -> NoisePlan:
    return NoisePlan(queries=10, sigma_threshold=3.0, sigma_votes=5.0, sigma_hidden=0.4,
                     hidden_sens=0.2, target="soft")


def test_aggregate_vote_and_hidden_noise_follow_the_plan():
    """noisy sum − sum ~ N(0, σ_votes²), noisy mean − clipped mean ~ N(0, σ_hidden²)."""
    gen = torch.Generator().manual_seed(0)
    summed = torch.rand(200, 12, generator=gen) * 4
    vectors = torch.randn(5, 200, 8, generator=gen) * 3
    plan = _plan()
    agg = aggregate(vectors, summed, plan, threshold=2.0, clip=1.0, generator=gen)
    votes_noise = (agg.soft - summed).numpy()
    hidden_noise = (agg.hidden - clip_rows(vectors, 1.0).mean(0)).numpy()
    for noise, sigma in ((votes_noise, plan.sigma_votes), (hidden_noise, plan.sigma_hidden)):
        power = _gauss_power(noise.size, sigma)
        assert power >= MIN_POWER, power
        assert gaussian_pvalue(noise, sigma) >= LEVEL, (sigma, float(noise.std()), power)


def test_aggregate_threshold_noise_follows_the_plan():
    """With the top count one σ₁ below the threshold, P[answered] = Φ(−1); at 1.5× (or ÷1.5)
    the noise gives Φ(−1/1.5) (Φ(−1.5)), which the binomial test sees with the stated power."""
    plan, n = _plan(), 4000
    summed = torch.zeros(n, 4)
    summed[:, 0] = 10.0 - plan.sigma_threshold
    agg = aggregate(None, summed, NoisePlan(queries=10, sigma_threshold=plan.sigma_threshold,
                                            sigma_votes=plan.sigma_votes, target="soft"),
                    threshold=10.0, clip=1.0, generator=torch.Generator().manual_seed(1))
    expected = stats.norm.cdf(-1.0)

    def p_of(k: int) -> float:
        return stats.binomtest(int(k), n, expected).pvalue

    power = min(simulated_power(p_of, lambda rng, f=f: rng.binomial(n, stats.norm.cdf(-1 / f)),
                                LEVEL, 200) for f in (SCALE, 1 / SCALE))
    assert power >= MIN_POWER, power
    assert p_of(int(agg.answered.sum())) >= LEVEL, float(agg.answered.float().mean())


def _empty_documents(n: int, pairs: int = 2):
    """n documents whose mask is 0: every clipped gradient is 0, so a step releases its noise."""
    centers = torch.zeros(n, pairs, dtype=torch.long)
    return centers, centers + 1, torch.zeros(n, pairs)


def _train(n: int, rate: float, steps: int, z: float, clip: float, sizes: list, grads: list):
    centers, contexts, mask = _empty_documents(n)

    def draw(batch, generator):
        return centers[batch], contexts[batch], mask[batch]

    def release(g):
        grads.append([t.clone() for t in g])
        return g

    train_on_pairs(n, draw, torch.full((4,), 0.25), dim=3, negatives=1, noise_multiplier=z,
                   max_grad_norm=clip, sampling_rate=rate, steps=steps, lr=0.1,
                   generator=torch.Generator().manual_seed(2), release=release,
                   on_batch=lambda batch: sizes.append(len(batch)), curve_points=1)


def test_dpsgd_gradient_noise_is_z_times_c_over_the_expected_batch():
    """Each released coordinate is N(0, (zC/B)²), B = round(q·n) (Opacus' convention)."""
    n, rate, z, clip, steps = 500, 0.04, 1.3, 0.5, 30
    sizes, grads = [], []
    _train(n, rate, steps, z, clip, sizes, grads)
    noise = torch.cat([torch.cat([g.reshape(-1) for g in step]) for step in grads]).numpy()
    sigma = z * clip / round(rate * n)
    power = _gauss_power(noise.size, sigma)
    assert power >= MIN_POWER, power
    assert gaussian_pvalue(noise, sigma) >= LEVEL, (float(noise.std()), sigma, power)


def test_poisson_batches_match_the_rate_the_ledger_charges():
    """Batch sizes are Binomial(n, q) for the q of the ledger's DP-SGD event; the test's power
    against a sampler at 1.5·q is computed by simulation (10·q is far beyond it)."""
    from dpkit_dped.dpsgd import DpedDpsgd
    from dpkit.contract.registry import validate_params

    defense = DpedDpsgd(validate_params(DpedDpsgd, {"sampling_rate": 0.02, "steps": 50}))
    rate = charged_sampling_rate(defense.spends_for(1.0))
    n, steps = 400, 50
    sizes, grads = [], []
    _train(n, rate, steps, 1.0, 1.0, sizes, grads)
    power = simulated_power(lambda s: batch_size_p_value(list(s), n, rate),
                            lambda rng: rng.binomial(n, SCALE * rate, steps), LEVEL, 200)
    assert power >= MIN_POWER, power
    assert batch_size_p_value(sizes, n, rate) >= LEVEL, (np.mean(sizes), n * rate)


@pytest.mark.parametrize("factor", [10.0, 1.5])
def test_a_sampler_at_a_multiple_of_the_rate_fails_the_batch_law(factor):
    """The same test run on a trainer given factor·q while the ledger charges q."""
    n, rate, steps = 400, 0.02, 50
    sizes, grads = [], []
    _train(n, rate * factor, steps, 1.0, 1.0, sizes, grads)
    assert batch_size_p_value(sizes, n, rate) < LEVEL


def test_teacher_shards_are_disjoint_and_cover_the_corpus():
    """One document is in exactly one teacher's shard (the pipeline's own partition)."""
    from dpkit_dped import pipeline

    texts = [f"document {i} about {i % 7}" for i in range(500)]
    for teachers in (1, 4, 20):
        shards = pipeline.partition(texts, teachers, 3)
        flat = [i for shard in shards for i in shard]
        assert len(shards) == teachers
        assert sorted(flat) == list(range(len(texts))), "a document is in two shards or none"
        again = pipeline.partition(texts[:250] + texts[251:], teachers, 3)
        moved = sum(a != [j + (j >= 250) for j in b] for a, b in zip(
            [[i for i in s if i != 250] for s in shards], again))
        assert moved <= 1, "removing one document changed more than one shard"


def test_each_teacher_adds_one_point_of_the_simplex_per_query():
    """Soft: every teacher's row is a probability vector, so the sum over N teachers has entries in
    [0, N] and rows summing to N (the √2 / 1 sensitivities rest on it); hard: N votes per query."""
    from dpkit_dped.aggregation import teacher_probability_sum, teacher_votes, vote_histogram
    from dpkit_dped.skipgram import WordModel

    gen = torch.Generator().manual_seed(4)
    teachers = [WordModel(torch.randn(30, 4, generator=gen) * 3, torch.randn(30, 4, generator=gen))
                for _ in range(5)]
    queries = torch.arange(30)
    soft = teacher_probability_sum(teachers, queries, chunk=7)
    assert torch.allclose(soft.sum(1), torch.full((30,), 5.0), atol=1e-4)
    assert float(soft.min()) >= 0 and float(soft.max()) <= 5 + 1e-5
    votes = teacher_votes(teachers, queries, chunk=7)
    assert votes.shape == (5, 30) and bool((votes != queries).all()), "a query votes for itself"
    hist = vote_histogram(votes, 30)
    assert torch.equal(hist.sum(1), torch.full((30,), 5.0)) and float(hist.max()) <= 5


def test_clip_factor_is_opacus_and_never_scales_up():
    """min(1, C / (‖g‖ + 1e-6)), exactly; in float64 the clipped sums keep their precision."""
    from dpkit_dped.clipping import clip_factors, clipped_gradient_sum

    norms = torch.tensor([0.5, 2.0, 8.0], dtype=torch.float64)
    assert clip_factors(norms, 2.0).tolist() == [1.0, 2.0 / (2.0 + 1e-6), 2.0 / (8.0 + 1e-6)]
    ids = [torch.tensor([[0, 2], [1, 1]]), torch.tensor([[3], [0]])]
    grads = [torch.randn(2, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
             torch.randn(2, 1, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))]
    sums, got = clipped_gradient_sum(ids, grads, 4, 1.0)
    assert all(s.dtype == torch.float64 for s in sums) and got.dtype == torch.float64
    dense = torch.zeros(2, 2, 4, 3, dtype=torch.float64)
    for t in range(2):
        for b in range(2):
            for i, g in zip(ids[t][b].tolist(), grads[t][b]):
                dense[b, t, i] += g
    norms = dense.flatten(1).norm(dim=1)
    assert torch.allclose(got, norms, rtol=1e-12)
    expected = (dense * clip_factors(norms, 1.0).view(2, 1, 1, 1)).sum(0)
    assert all(torch.allclose(sums[t], expected[t], rtol=1e-12) for t in range(2))
