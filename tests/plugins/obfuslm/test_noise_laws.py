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
