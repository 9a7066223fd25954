"""Nearest-neighbour recovery rates."""

import math

import torch

from dpkit.testing.strategies_tokens import random_space
from dpkit.text.recovery import knn_recovery


def test_knn_recovery_matches_definition():
    space = random_space(40, 5, 0)
    g = torch.Generator().manual_seed(1)
    truth = torch.randint(0, 40, (200,), generator=g)
    noisy = space.vectors[truth] + 0.7 * torch.randn(200, 5, generator=g)
    rates = knn_recovery(noisy, space.vectors, truth, (1, 5))
    ranks = torch.cdist(noisy, space.vectors).argsort(1)
    assert math.isclose(rates[1], float((ranks[:, 0] == truth).float().mean()), abs_tol=1e-9)
    assert math.isclose(rates[5], float((ranks[:, :5] == truth[:, None]).any(1).float().mean()))
    assert rates[1] <= rates[5]
