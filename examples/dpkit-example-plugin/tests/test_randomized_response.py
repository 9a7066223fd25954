"""Tests of the example mechanism: dpkit's contract suite plus its own formula checks."""

from __future__ import annotations

import math

import pytest
import torch

import dpkit
from dpkit.testing import MechanismContract

RandomizedResponse = pytest.importorskip(
    "dpkit_example", reason="pip install -e examples/dpkit-example-plugin").RandomizedResponse


class TestRandomizedResponseContract(MechanismContract):
    """dpkit's shared checks: guarantee declared, params validated, seeded, audited."""

    mechanism = "randomized_response"
    params = {"epsilon": 1.0}
    invalid_params = [{"epsilon": 0}, {"epsilon": -1.0}, {"eps": 1.0}]


def space(v=20):
    return dpkit.EmbeddingSpace("toy", [f"t{i}" for i in range(v)], torch.randn(v, 4))


def test_probabilities_match_the_formula():
    mech = RandomizedResponse(RandomizedResponse.Params(epsilon=2.0))
    probs = mech.output_log_probs(torch.tensor([3]), space()).exp()[0]
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)
    assert math.isclose(float(probs[3] / probs[4]), math.exp(2.0), rel_tol=1e-6)


def test_empirical_keep_rate():
    mech = RandomizedResponse(RandomizedResponse.Params(epsilon=2.0))
    ids = torch.zeros(20000, dtype=torch.long)
    out = mech.privatize(ids, space=space(), generator=torch.Generator().manual_seed(0))
    rate = float((out == 0).float().mean())
    expected = mech.keep_probability(20)
    assert abs(rate - expected) < 4 * math.sqrt(expected * (1 - expected) / 20000)
    assert int(out.max()) < 20 and int(out.min()) >= 0
