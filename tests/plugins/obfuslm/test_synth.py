"""WeightSynth: weights are stochastic within clusters, and the declared ε really holds."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from dpkit_obfuslm.cluster import embed_cluster, members_from_labels
from dpkit_obfuslm.synth import log_weights, shift_invariant_sensitivity, weight_synth


def test_rows_sum_to_one_and_stay_inside_clusters():
    x = torch.randn(200, 10, generator=torch.Generator().manual_seed(0))
    clusters = embed_cluster(x, 6, 0.9)
    for calibration in ("exact", "faithful"):
        w = weight_synth(x, clusters, 0.5, torch.Generator().manual_seed(1), calibration)
        dense = w.to_dense()
        assert torch.allclose(dense.sum(1), torch.ones(200), atol=1e-5)
        assert bool((dense >= 0).all())
        same = clusters.labels.unsqueeze(0) == clusters.labels.unsqueeze(1)
        assert bool((dense[~same] == 0).all())
        assert torch.allclose(w.apply(x), dense @ x, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_weights_drawn_on_the_cpu_synthesize_a_cuda_table_on_its_device():
    x = torch.randn(200, 10, generator=torch.Generator().manual_seed(0))
    w = weight_synth(x, embed_cluster(x, 6, 0.9), 0.5, torch.Generator().manual_seed(1))
    out = w.apply(x.cuda())
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), w.apply(x), atol=1e-5, rtol=1e-5)



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_log_weights_of_a_cuda_table_are_the_cpu_ones_on_its_device():
    """The clusters' member table is kept on the CPU; a CUDA table's log-weights and validity
    mask are computed on its device and equal the CPU ones."""
    x = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
    clusters = embed_cluster(x, 4, 0.9)
    assert clusters.members.device.type == "cpu"
    (u, valid), (u_cpu, valid_cpu) = log_weights(x.cuda(), clusters, 0.5), log_weights(x, clusters, 0.5)
    assert u.device.type == valid.device.type == "cuda"
    assert torch.equal(valid.cpu(), valid_cpu)
    torch.testing.assert_close(u.cpu(), u_cpu, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_weights_of_a_cuda_table_are_drawn_from_its_cuda_generator_and_stay_in_their_clusters():
    """On a CUDA cell the table and the generator are on the GPU: the Laplace noise is drawn there,
    and the weights are still stochastic rows inside their clusters, the CPU law's support."""
    x = torch.randn(60, 5, generator=torch.Generator().manual_seed(0))
    clusters = embed_cluster(x, 4, 0.9)
    w = weight_synth(x.cuda(), clusters, 0.5, torch.Generator(device="cuda").manual_seed(1))
    dense = w.to_dense().cpu()
    assert torch.allclose(dense.sum(1), torch.ones(60), atol=1e-5) and bool((dense >= 0).all())
    same = clusters.labels.unsqueeze(0) == clusters.labels.unsqueeze(1)
    assert bool((dense[~same] == 0).all())
    other = weight_synth(x.cuda(), clusters, 0.5, torch.Generator(device="cuda").manual_seed(2))
    assert not torch.equal(other.to_dense().cpu(), dense)  # drawn, not the noiseless weights
    out = w.apply(x.cuda())
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), dense @ x, atol=1e-5, rtol=1e-5)

def test_sensitivity_matches_brute_force():
    x = torch.randn(40, 6, generator=torch.Generator().manual_seed(4))
    clusters = members_from_labels(torch.arange(40) // 5, 5)
    u, valid = log_weights(x, clusters, 2.0)
    fast = shift_invariant_sensitivity(u, valid)
    for c in range(8):
        rows = u[c].double()
        best = 0.0
        for i, j in itertools.permutations(range(5), 2):
            diff = rows[i] - rows[j]
            best = max(best, float((diff - diff.median()).abs().sum()))  # median minimises L1
        assert fast[c].item() == pytest.approx(best, rel=1e-5)


def log_density(log_w: torch.Tensor, mean: torch.Tensor, scale: float) -> torch.Tensor:
    """log p(softmax outputs with log-weights ``log_w`` ``[P, m]``) up to the Jacobian shared by
    all inputs: the Laplace density of u' = log_w + c integrated over the lost shift c."""
    step = 0.01
    c = torch.arange(-80.0, 80.0, step, dtype=torch.float64)
    z = (log_w.unsqueeze(1) + c.view(1, -1, 1) - mean.view(1, 1, -1)).abs().sum(2) / scale
    return torch.logsumexp(-z, 1) + math.log(step) - mean.numel() * math.log(2 * scale)


def cluster_of_three(epsilon: float, calibration: str):
    x = torch.tensor([[1.0, 0.0, 0.1], [0.8, 0.6, 0.0], [0.3, 0.9, 0.4]])
    clusters = members_from_labels(torch.zeros(3, dtype=torch.long), 3)
    u, _ = log_weights(x, clusters, epsilon)
    w = weight_synth(x, clusters, epsilon, torch.Generator().manual_seed(0), calibration)
    return u[0].double(), w.noise_scale[0].double()


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_exact_calibration_gives_epsilon_indistinguishability(epsilon):
    u, scale = cluster_of_three(epsilon, "exact")
    assert torch.allclose(scale, scale[0].expand(3))
    torch.manual_seed(5)
    lap = torch.distributions.Laplace(0.0, float(scale[0]))
    points = [u[i] + lap.sample((10, 3)).double() for i in range(3)]
    points += [u[0] + t * scale[0] * torch.tensor([[1, -1, 0], [0, 1, -1], [-1, 0.5, 2]],
                                                  dtype=torch.float64) for t in (5.0, 20.0)]
    points = torch.cat(points)
    dens = [log_density(points, u[i], float(scale[i])) for i in range(3)]
    worst = max(float((dens[i] - dens[j]).abs().max()) for i, j in itertools.combinations(range(3), 2))
    assert worst <= epsilon * (1 + 1e-3)
    assert worst >= 0.3 * epsilon      # the noise is not wildly larger than needed


def test_faithful_per_row_scale_has_no_finite_epsilon():
    u, scale = cluster_of_three(1.0, "faithful")
    i, j = int(scale.argmin()), int(scale.argmax())
    assert float(scale[j] - scale[i]) > 1e-3
    direction = torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64)
    pts = torch.stack([u[i] + t * direction for t in (2.0, 8.0, 32.0)])
    losses = (log_density(pts, u[i], float(scale[i])) - log_density(pts, u[j], float(scale[j])))
    losses = losses.abs().tolist()
    assert losses[0] < losses[1] < losses[2]          # grows without bound along the direction
    assert losses[2] > 3.0
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(0))
    w = weight_synth(x, embed_cluster(x, 5, 0.5), 1.0, torch.Generator().manual_seed(0), "faithful")
    assert w.epsilon == math.inf


def test_bad_epsilon_is_explained():
    x = torch.randn(10, 3)
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        weight_synth(x, embed_cluster(x, 2, 0.5), 0.0, torch.Generator())
