"""MINE (Donsker–Varadhan) recovers the known MI of correlated Gaussians: −½ log(1 − ρ²) per dim."""

import math

import pytest
import torch
from dpkit_hiddenecho.mine import (
    MineEstimator,
    donsker_varadhan,
    sample_tokens,
    token_rows,
)


def gaussian_pair(n, dim, rho, generator):
    x = torch.randn(n, dim, generator=generator)
    z = torch.randn(n, dim, generator=generator)
    return x, rho * x + math.sqrt(1 - rho ** 2) * z


@pytest.mark.parametrize("dim,rho", [(1, 0.8), (1, 0.0)])
def test_mine_estimates_gaussian_mutual_information(dim, rho):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    est = MineEstimator(dim, dim, hidden=32, lr=5e-3)
    for _ in range(200):
        est.fit(*gaussian_pair(256, dim, rho, g), steps=1, generator=g)
    truth = -dim / 2 * math.log(1 - rho ** 2)
    value = float(est.estimate(*gaussian_pair(20000, dim, rho, g), generator=g))
    assert value == pytest.approx(truth, abs=0.08)


def test_estimate_passes_gradients_to_inputs_not_critic():
    est = MineEstimator(2, 2)
    x = torch.randn(64, 2, requires_grad=True)
    est.estimate(x, x * 0.5).backward()
    assert x.grad is not None
    assert all(p.grad is None for p in est.critic.parameters())


def test_bound_needs_pairs():
    est = MineEstimator(1, 1)
    with pytest.raises(ValueError, match="paired rows"):
        donsker_varadhan(est.critic, torch.zeros(1, 1), torch.zeros(1, 1))


def test_token_sampling_only_picks_real_tokens():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    g = torch.Generator().manual_seed(0)
    idx = sample_tokens(mask, 10, g)
    assert sorted(idx.tolist()) == [0, 1, 3]
    assert sample_tokens(mask, 2, g).numel() == 2
    states = torch.arange(6.0).view(2, 3, 1)
    assert token_rows(states, idx).view(-1).tolist() == [float(i) for i in idx.tolist()]
