"""STENCIL / dχ-STENCIL: window weights, the contribution bound, decoding rules, guarantees."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit_stencil.mechanisms import DxStencil, Stencil
from dpkit_stencil.window import max_contribution, window_matrix, window_offsets
from dpkit_stencil.window import window_mix

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


def test_window_offsets_refuse_bad_sizes_and_sigmas_with_their_values():
    with pytest.raises(ValueError, match="L must be ≥ 1, got 0"):
        window_offsets(0, 1.0)
    for sigma in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"sigma must be > 0, got {sigma}"):
            window_offsets(3, sigma)


@pytest.mark.parametrize("L", [1, 3, 5, 7, 9, 11])
def test_odd_windows_are_centred_on_the_token(L):
    offsets, weights = window_offsets(L, 1.3)
    half = (L - 1) // 2
    assert offsets == list(range(-half, half + 1))
    assert weights == [math.exp(-o * o / (2 * 1.3 * 1.3)) for o in offsets]


def test_window_matrix_is_exact_in_double_precision():
    """Rows of f sum to 1 to double precision (a float32 accumulator would be off by ~1e-8)."""
    f = window_matrix(40, 7, 0.9)
    assert f.dtype == torch.float64
    assert float((f.sum(1) - 1).abs().max()) < 1e-14
    mixed = window_mix(torch.eye(40, dtype=torch.float64) * 3.0, 7, 0.9)
    assert torch.allclose(mixed, 3.0 * f, rtol=0, atol=1e-14)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_window_mix_runs_on_the_input_device():
    out = window_mix(torch.randn(9, 3, device="cuda"), 5, 1.0)
    assert out.device.type == "cuda"
