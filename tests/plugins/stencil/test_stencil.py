"""STENCIL / dχ-STENCIL: window weights, the contribution bound, decoding rules, guarantees."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit_stencil.mechanisms import DxStencil, Stencil
from dpkit_stencil.window import max_contribution, window_matrix, window_offsets

sigmas = st.sampled_from([0.25, 0.5, 0.75, 1.0, 1.25, 3.0, 50.0])


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), sigmas, st.integers(1, 40))
def test_rows_sum_to_one_and_columns_to_at_most_two(L, sigma, n):
    W = window_matrix(n, L, sigma)
    assert torch.allclose(W.sum(1), torch.ones(n, dtype=W.dtype))
    columns = W.sum(0)
    assert float(columns.max()) <= 2.0 + 1e-9
    assert float(columns.max()) <= max_contribution(L, sigma) + 1e-9
    if n > 2 * L + 1:
        assert torch.allclose(columns[L:n - L], torch.ones(n - 2 * L, dtype=W.dtype))


def test_window_shapes_odd_and_even():
    offsets, weights = window_offsets(5, 1.0)
    assert offsets == [-2, -1, 0, 1, 2] and max(weights) == weights[2]
    offsets, weights = window_offsets(4, 1.0)
    assert offsets == [-1, 0, 1, 2] and weights[1] == weights[2] == max(weights)
    W = window_matrix(9, 4, 0.75)
    assert W[4, 4] == W[4, 5] and W[4, 4] > W[4, 3]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9), sigmas, st.integers(1, 20))
def test_mixed_vectors_move_at_most_c_times_input_distance(seed, L, sigma, n):
    """Proof step of Theorem 1: Σᵢ‖rᵢ − r'ᵢ‖ ≤ C·Σⱼ‖xⱼ − x'ⱼ‖ for any two sequences."""
    space = random_space(30, 5, seed)
    mech = DxStencil(DxStencil.Params(eta=1.0, window=L, sigma=sigma))
    g = torch.Generator().manual_seed(seed)
    x, x2 = torch.randint(0, 30, (2, n), generator=g)
    r, r2 = mech.mixed(x, space).double(), mech.mixed(x2, space).double()
    moved = float((r - r2).norm(dim=1).sum())
    budget = max_contribution(L, sigma) * float((space.vectors[x] - space.vectors[x2]).double().norm(dim=1).sum())
    assert moved <= budget + 1e-6


def test_stencil_never_returns_the_original_except_stop_words_and_oov():
    space = random_space(60, 6, 1, stop_words=True)
    ids = torch.tensor([0, 10, 11, -1, 12, 1, 30, 59])
    out = Stencil(Stencil.Params(window=5, sigma=1.25)).privatize(ids, space=space, generator=torch.Generator())
    content = torch.tensor([False, True, True, False, True, False, True, True])
    assert bool((out[content] != ids[content]).all())
    assert out[0] == 0 and out[5] == 1 and out[3] == -1
    reason = Stencil(Stencil.Params()).guarantee(space)
    assert isinstance(reason, NoGuarantee) and "original" in reason.reason


def test_dx_stencil_guarantee_is_sequence_level_and_at_most_two_eta():
    space = random_space(20, 4, 0)
    for L in (1, 4, 5, 8):
        g = DxStencil(DxStencil.Params(eta=3.0, window=L, sigma=0.75)).guarantee(space)
        assert isinstance(g, MetricDpGuarantee) and g.unit == "sequence" and g.metric == "l2"
        assert 3.0 <= g.eta <= 6.0 + 1e-9
    assert DxStencil(DxStencil.Params(eta=3.0, window=1)).guarantee(space).eta == pytest.approx(3.0)


def test_dx_stencil_decodes_noisy_vector_only():
    space = random_space(50, 6, 2)
    ids = torch.arange(50)
    quiet = DxStencil(DxStencil.Params(eta=1e7, window=1, metric="l2"))
    assert torch.equal(quiet.privatize(ids, space=space, generator=torch.Generator()), ids)
    loud = DxStencil(DxStencil.Params(eta=0.01, window=3))
    out = loud.privatize(ids, space=space, generator=torch.Generator().manual_seed(0))
    assert float((out == ids).float().mean()) < 0.3


def test_even_window_caps_preservation():
    space = random_space(200, 8, 3)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 200, (300,), generator=g)
    odd = DxStencil(DxStencil.Params(eta=1e7, window=5, sigma=0.5, metric="l2"))
    even = DxStencil(DxStencil.Params(eta=1e7, window=4, sigma=0.5, metric="l2"))
    keep_odd = float((odd.privatize(ids, space=space, generator=g) == ids).float().mean())
    keep_even = float((even.privatize(ids, space=space, generator=g) == ids).float().mean())
    assert keep_odd > 0.95 and keep_even < keep_odd


@pytest.mark.parametrize("L", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("sigma", [0.5, 1.25, 4.0])
def test_pure_python_contribution_bound_equals_the_window_matrix(L, sigma):
    """max_contribution (no torch: a spec's guarantee is checked without it) is the largest column
    sum of the torch window matrix dχ-STENCIL mixes with."""
    from_matrix = max(float(window_matrix(n, L, sigma).sum(0).max()) for n in range(1, 3 * L + 3))
    assert max_contribution(L, sigma) == pytest.approx(from_matrix, abs=1e-12)


def test_dx_stencil_draws_on_the_registered_laplace_dx_stream():
    """privatize_text's common random numbers: dχ-STENCIL names laplace_dx's noise stream."""
    from dpkit.contract.plugins import get_registry

    assert DxStencil.noise_stream == get_registry().get("mechanism", "laplace_dx").cls.noise_stream
