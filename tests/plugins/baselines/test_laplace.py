"""LaplaceDx and Text2Text: log-ratio bound, clipping, nearest-token release (sampler: tests/core)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import MetricDpGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit_baselines.laplace import LaplaceDx, Text2Text


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 30), st.floats(0.01, 50), st.integers(0, 1000))
def test_log_ratio_within_eta_distance(d, eta, seed):
    g = gen(seed)
    x, x2, y = torch.randn(3, 1, d, generator=g).double() * 3
    mech = LaplaceDx(LaplaceDx.Params(eta=eta))
    ratio = mech.log_density(x, y) - mech.log_density(x2, y)
    assert float(ratio) <= eta * float((x - x2).norm()) + 1e-6


def test_privatize_shape_clip_and_guarantee():
    mech = LaplaceDx(LaplaceDx.Params(eta=0.1, clip_bound=2.0))
    x = torch.randn(7, 4)
    y = mech.privatize(x, generator=gen())
    assert y.shape == x.shape and float(y.norm(dim=1).max()) <= 2.0 + 1e-5
    space = random_space(10, 4, 0)
    assert mech.guarantee(space) == MetricDpGuarantee(0.1, "l2", space.name, "token")
    with pytest.raises(Exception, match="clip"):
        mech.log_density(x, y)


def test_same_generator_same_noise():
    mech = LaplaceDx(LaplaceDx.Params(eta=1.0))
    x = torch.zeros(5, 3)
    assert torch.equal(mech.privatize(x, generator=gen(4)), mech.privatize(x, generator=gen(4)))


def test_text2text_large_eta_keeps_tokens_small_eta_changes_them():
    space = random_space(50, 8, 2)
    ids = torch.tensor([3, -1, 7, 49])
    keep = Text2Text(Text2Text.Params(eta=1e6)).privatize(ids, space=space, generator=gen())
    assert keep.tolist() == ids.tolist()
    many = torch.arange(50).repeat(20)
    noisy = Text2Text(Text2Text.Params(eta=0.05)).privatize(many, space=space, generator=gen())
    assert float((noisy == many).float().mean()) < 0.3
    assert Text2Text(Text2Text.Params(eta=2.0)).guarantee(space).eta == 2.0


def test_params_reject_bad_eta():
    with pytest.raises(ValueError, match="eta"):
        LaplaceDx.Params(eta=0)
    with pytest.raises(ValueError, match="eta"):
        LaplaceDx.Params(eta=math.inf)
