"""Kozachenko–Leonenko entropy and mutual information against closed forms."""

import math

import torch

from dpkit.text.entropy import kl_entropy, kl_mutual_information


def test_kl_entropy_of_a_gaussian():
    g = torch.Generator().manual_seed(0)
    x = 2.0 * torch.randn(3000, 2, generator=g)
    exact = 0.5 * 2 * math.log(2 * math.pi * math.e * 4.0)
    assert abs(kl_entropy(x, 3) - exact) < 0.1


def test_mutual_information_of_gaussian_channel():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4000, 1, generator=g)
    z = 0.5 * torch.randn(4000, 1, generator=g)
    exact = 0.5 * math.log(1 + 1 / 0.25)
    assert abs(kl_mutual_information(x, x + z) - exact) < 0.1
    big = 100 * torch.randn(4000, 1, generator=g)
    assert abs(kl_mutual_information(x, x + big)) < 0.05
