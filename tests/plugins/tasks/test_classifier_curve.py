"""The utility classifier's training curve: drawn by capped L-BFGS fits, ending in the real model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from dpkit.ml.training import converged
from dpkit_tasks.classifier import fit_with_curve


def _problem(seed=0, n=300, d=20):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (x @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(int)
    return x, y


def test_the_last_fit_is_the_model_a_single_full_fit_returns():
    x, y = _problem()
    model, curve = fit_with_curve(x, y, seed=0)
    single = LogisticRegression(max_iter=2000, C=1.0, random_state=0).fit(x, y)
    assert np.array_equal(model.coef_, single.coef_)
    assert curve.steps[-1] == int(single.n_iter_[0]) and len(curve.steps) >= 2
    assert all(a <= b for a, b in zip(curve.steps, curve.steps[1:]))
    assert converged(curve)


def test_a_solver_stopped_by_its_cap_is_flagged():
    x, y = _problem(n=2000, d=200)
    model, curve = fit_with_curve(x, y, seed=0, max_iter=8)
    assert curve.steps[-1] == 8 and int(model.n_iter_[0]) == 8
    assert not converged(curve)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("kind", ["mean_vectors", "bow"])
def test_features_of_ids_a_cuda_server_holds_are_the_cpu_ones(kind):
    """A CUDA cell's server holds the substituted ids on the GPU (found on an H200: the features
    indexed the CPU table with CUDA ids and the server raised)."""
    from dpkit_tasks.classifier import doc_features

    from dpkit.testing.strategies_tokens import random_space

    space = random_space(32, 4, 0)
    docs = [torch.tensor([1, 5, -1, 7]), torch.tensor([], dtype=torch.long), torch.tensor([3])]
    on_cpu = doc_features(docs, space, kind)
    on_cuda = doc_features([d.cuda() for d in docs], space.to("cuda"), kind)
    assert (on_cpu != on_cuda).sum() == 0
