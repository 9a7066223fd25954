"""ObfusLM's noise and clustering, white-box: WeightSynth's Laplace noise follows Laplace(Δ_S/ε)
with Δ_S recomputed by brute force (power against a 1.5× scale error computed by simulation), the
released weights are softmax(u + that noise), two calls draw independent noise, and the
clusters the guarantee reports (k achieved, share below k) are those of Alg. 1 read literally."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from dpkit.audit.independence import dependence
from dpkit.audit.noise_law import laplace_pvalue, simulated_power
from dpkit_obfuslm.cluster import embed_cluster, embed_cluster_dense
from dpkit_obfuslm.synth import laplace, log_weights, weight_synth

LEVEL = 1e-3


def _setup(n: int = 120, dim: int = 6, k: int = 5, seed: int = 0):
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    return x, embed_cluster(x, k, 0.6)


def _brute_sensitivity(u: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    out = []
    for c in range(u.shape[0]):
        m = int(valid[c].sum())
        rows = u[c, :m, :m].double()
        best = 0.0
        for i, j in itertools.permutations(range(m), 2):
            diff = rows[i] - rows[j]
            best = max(best, float((diff - diff.median()).abs().sum()))
        out.append(best)
    return torch.tensor(out, dtype=torch.float64)


def test_weight_noise_is_laplace_at_sensitivity_over_epsilon():
    x, clusters = _setup()
    eps = 0.7
    w = weight_synth(x, clusters, eps, torch.Generator().manual_seed(1))
    u, valid = log_weights(x, clusters, eps)
    scale = _brute_sensitivity(u, valid).double() / eps
    assert torch.allclose(w.noise_scale.double().amax(1), scale, rtol=1e-4)
    pair = valid.unsqueeze(2) & valid.unsqueeze(1)
    both = pair & (scale.view(-1, 1, 1) > 0)
    gen = torch.Generator().manual_seed(11)
    noise = np.concatenate([weight_synth(x, clusters, eps, gen).noise.double()[both].numpy()
                            for _ in range(6)])
    per_value = np.tile(scale.view(-1, 1, 1).expand_as(w.noise)[both].numpy(), 6)
    n = noise.size
    power = min(simulated_power(lambda z: laplace_pvalue(z, per_value),
                                lambda rng, f=f: rng.laplace(0, per_value * f, n), LEVEL, 200)
                for f in (1.5, 1 / 1.5))
    assert power >= 0.95, power
    assert laplace_pvalue(noise, per_value) >= LEVEL
    expect = torch.softmax(u + w.noise.to(u.dtype), dim=2).masked_fill(~pair, 0.0)
    assert torch.allclose(w.weights, expect, atol=1e-6)


def test_laplace_sampler_has_the_scale_it_is_given():
    scale = torch.full((20000,), 0.3, dtype=torch.float64)
    z = laplace((20000,), scale, torch.Generator().manual_seed(2)).double().numpy()
    assert stats.kstest(z / 0.3, stats.laplace.cdf).pvalue >= LEVEL


def test_two_calls_draw_independent_weight_noise():
    x, clusters = _setup()
    gen = torch.Generator().manual_seed(3)
    first = weight_synth(x, clusters, 0.7, gen)
    a, b = first.noise, weight_synth(x, clusters, 0.7, gen).noise
    valid = clusters.members >= 0
    pair = valid.unsqueeze(2) & valid.unsqueeze(1) & (first.noise_scale > 0).unsqueeze(2)
    p, repeats = dependence(a[pair].unsqueeze(1), b[pair].unsqueeze(1))
    assert repeats == 0 and p >= 1e-4, (p, repeats)


@pytest.mark.parametrize("k,beta,seed", [(2, 0.5, 0), (5, 0.6, 1), (8, 0.9, 2), (3, 0.0, 3)])
def test_reported_anonymity_is_alg1_read_literally(k, beta, seed):
    """k achieved and the share below k come from clusters equal to the dense reference's."""
    x = torch.randn(90, 5, generator=torch.Generator().manual_seed(seed))
    fast, ref = embed_cluster(x, k, beta), embed_cluster_dense(x, k, beta)
    assert torch.equal(fast.labels, ref.labels)
    sizes = np.bincount(ref.labels.numpy())
    assert fast.k_achieved == int(sizes.min()) and int(sizes.max()) <= k
    below = sizes[sizes < k].sum() / len(ref.labels)
    assert fast.share_below_k == pytest.approx(below)
    assert torch.equal(fast.size_of_row(), torch.as_tensor(sizes)[fast.labels])


def test_paper_scale_is_each_rows_range_over_epsilon_and_faithful_uses_it():
    x, clusters = _setup(n=60, k=4)
    eps = 0.9
    u, valid = log_weights(x, clusters, eps)
    expected = torch.zeros(valid.shape, dtype=torch.float64)
    for c in range(u.shape[0]):
        m = int(valid[c].sum())
        rows = u[c, :m, :m].double()
        expected[c, :m] = (rows.max(1).values - rows.min(1).values) / eps
    exact = weight_synth(x, clusters, eps, torch.Generator().manual_seed(0))
    assert torch.allclose(exact.paper_scale.double(), expected, atol=1e-5)
    faithful = weight_synth(x, clusters, eps, torch.Generator().manual_seed(0), "faithful")
    assert torch.allclose(faithful.noise_scale.double(), expected, atol=1e-5)
    assert faithful.epsilon == float("inf") and exact.epsilon == eps


def test_faithful_singletons_claim_zero_and_errors_say_what_is_allowed():
    from dpkit_obfuslm.cluster import members_from_labels

    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))
    singletons = members_from_labels(torch.arange(5), 2)
    assert weight_synth(x, singletons, 1.0, torch.Generator(), "faithful").epsilon == 0.0
    pairs = members_from_labels(torch.tensor([0, 0, 1, 2, 3]), 2)
    assert weight_synth(x, pairs, 1.0, torch.Generator(), "faithful").epsilon == float("inf")
    with pytest.raises(ValueError) as bad_eps:
        weight_synth(x, pairs, 0.0, torch.Generator())
    assert str(bad_eps.value) == "WeightSynth: epsilon must be > 0, got 0.0; the paper uses 0.03–3"
    with pytest.raises(ValueError) as bad_cal:
        weight_synth(x, pairs, 1.0, torch.Generator(), "paper")
    assert str(bad_cal.value) == ("WeightSynth: calibration must be 'exact' or 'faithful', got "
                                  "'paper'")


def test_synthesis_matches_the_dense_matrix_in_double_precision():
    x, clusters = _setup(n=40, k=4)
    w = weight_synth(x, clusters, 1.0, torch.Generator().manual_seed(2))
    dense = torch.zeros(40, 40)
    for c, row in enumerate(clusters.members.tolist()):
        members = [m for m in row if m >= 0]
        for a, i in enumerate(members):
            for b, j in enumerate(members):
                dense[i, j] = w.weights[c, a, b]
    assert torch.equal(w.to_dense(), dense)
    table = torch.randn(40, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    out = w.apply(table)
    assert out.dtype == torch.float64
    assert torch.allclose(out, dense.double() @ table, atol=1e-6)


def test_laplace_draws_come_from_the_generator_only():
    scale = torch.full((50,), 2.0, dtype=torch.float64)
    a = laplace((50,), scale, torch.Generator().manual_seed(7))
    torch.manual_seed(123)  # the global stream must not matter
    b = laplace((50,), scale, torch.Generator().manual_seed(7))
    assert torch.equal(a, b) and a.dtype == torch.float32
    assert not torch.equal(a, laplace((50,), scale, torch.Generator().manual_seed(8)))


def test_log_weights_are_the_log_softmax_of_half_epsilon_cosine():
    from dpkit_obfuslm.cluster import members_from_labels

    x = torch.randn(9, 4, generator=torch.Generator().manual_seed(5)) * 3
    clusters = members_from_labels(torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2]), 4)
    u, valid = log_weights(x, clusters, 1.7)
    unit = x / x.norm(dim=1, keepdim=True)
    for c, row in enumerate(clusters.members.tolist()):
        members = [m for m in row if m >= 0]
        cos = unit[members] @ unit[members].T
        expected = torch.log_softmax(1.7 * cos / 2, dim=1)
        m = len(members)
        assert torch.allclose(u[c, :m, :m], expected, atol=1e-5)
        assert bool(torch.isinf(u[c, m:, :]).all()) and bool(torch.isinf(u[c, :, m:]).all())


def test_sensitivity_with_padded_clusters_and_small_chunks_matches_brute_force():
    from dpkit_obfuslm.cluster import members_from_labels
    from dpkit_obfuslm.synth import shift_invariant_sensitivity

    x = torch.randn(40, 5, generator=torch.Generator().manual_seed(6)) * 2
    labels = torch.tensor([c for c, size in enumerate([5, 2, 3, 1, 4, 5, 2, 3, 5, 2, 4, 4])
                           for _ in range(size)])
    clusters = members_from_labels(labels, 5)
    u, valid = log_weights(x, clusters, 2.0)
    brute = _brute_sensitivity(u, valid)
    assert torch.allclose(shift_invariant_sensitivity(u, valid, chunk=5).double(), brute, atol=1e-4)
    assert torch.allclose(shift_invariant_sensitivity(u, valid).double(), brute, atol=1e-4)
    w = weight_synth(x, clusters, 2.0, torch.Generator().manual_seed(0))
    assert torch.allclose(w.sensitivity.double(), brute, atol=1e-4)


def test_dense_matrix_ignores_padding_even_next_to_the_last_row():
    """A padded cluster holding the last row: padding (−1) must not write into column n − 1."""
    from dpkit_obfuslm.cluster import members_from_labels

    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(4))
    clusters = members_from_labels(torch.tensor([0, 0, 0, 1, 1]), 3)
    w = weight_synth(x, clusters, 1.0, torch.Generator().manual_seed(0))
    dense = w.to_dense()
    assert float(dense[3, 4]) == float(w.weights[1, 0, 1]) > 0
    assert torch.allclose(dense.sum(1), torch.ones(5), atol=1e-6)
