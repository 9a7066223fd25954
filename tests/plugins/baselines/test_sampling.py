"""The discrete samplers' helpers: exact distances at any scale, Gumbel-max and inverse-CDF draws
that follow their law, come from the run's generator alone and never emit a zero-probability
output, row blocks that tile, and a frequency order that breaks ties by table order."""

import pytest
import torch

import dpkit_baselines.sampling as sampling
from dpkit.testing.strategies_tokens import random_space
from dpkit_baselines.sampling import (exact_pairwise_l2, frequency_rank, gumbel_argmax, row_spans,
                                      sample_by_id)


def total_variation(draws: torch.Tensor, probs: torch.Tensor) -> float:
    """Half the L1 distance between the empirical law of ``draws`` and ``probs``."""
    freq = torch.bincount(draws.reshape(-1), minlength=len(probs)).double() / draws.numel()
    return float((freq - probs.double()).abs().sum()) / 2


def test_pairwise_distances_are_exact_below_one_and_between_zero_vectors():
    x = 0.05 * torch.randn(30, 4, generator=torch.Generator().manual_seed(0))
    x[0] = 0.0
    x[1] = 0.0
    got = exact_pairwise_l2(x, x)
    want = torch.cdist(x.double(), x.double())
    assert float(want[2:, 2:].max()) < 1.0
    assert float((got - want).abs().max()) < 1e-12
    assert got[0, 1] == 0.0 and got[0, 0] == 0.0


def test_gumbel_argmax_follows_the_softmax_of_every_row_whatever_the_batch_shape():
    logits = torch.tensor([[0.0, 1.0, 2.5, -1.0, 0.5, -torch.inf],
                           [3.0, -2.0, 0.0, 0.0, 1.0, -torch.inf]], dtype=torch.float64)
    batch = logits.unsqueeze(1).expand(2, 30000, 6)
    draws = gumbel_argmax(batch, torch.Generator().manual_seed(0))
    assert draws.shape == (2, 30000)
    for row in range(2):
        assert total_variation(draws[row], torch.softmax(logits[row], 0)) < 0.01
    assert not bool((draws == 5).any())  # −∞: never drawn
    one = gumbel_argmax(logits[0], torch.Generator().manual_seed(1))  # a single row: one draw
    assert one.shape == () and 0 <= int(one) < 5


def test_gumbel_argmax_is_gumbel_max_over_the_generators_float64_uniforms():
    """Reproducible from the run's generator alone, at float64 resolution (float32 uniforms cap
    the Gumbel noise near 17 and make outputs far below the best unreachable)."""
    logits = torch.randn(500, 7, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.manual_seed(123)  # the global stream must not matter
    got = gumbel_argmax(logits, torch.Generator().manual_seed(5))
    u = torch.rand(logits.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert torch.equal(got, (logits - torch.log(-torch.log(u))).argmax(-1))
    assert not torch.equal(got, gumbel_argmax(logits, torch.Generator().manual_seed(6)))


def test_row_spans_tile_the_rows_in_blocks_of_at_most_max_block_cells(monkeypatch):
    monkeypatch.setattr(sampling, "MAX_BLOCK", 16)
    assert row_spans(10, 8) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert row_spans(9, 5) == [(0, 3), (3, 6), (6, 9)]
    assert row_spans(3, 100) == [(0, 1), (1, 2), (2, 3)]  # wider than a block: one row at a time
    assert row_spans(40, 1) == [(0, 16), (16, 32), (32, 40)]
    assert row_spans(20, 0) == [(0, 16), (16, 20)]
    assert row_spans(0, 4) == []


def test_frequency_rank_orders_by_count_and_breaks_ties_by_table_order():
    space = random_space(40, 3, 0)
    assert torch.equal(frequency_rank(space, None), torch.arange(40))
    counts = torch.tensor([1, 0] * 20)
    counts[7] = 5
    want = torch.tensor([7] + list(range(0, 40, 2)) + [i for i in range(1, 40, 2) if i != 7])
    assert torch.equal(frequency_rank(space, counts), want)



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_frequency_rank_of_cpu_counts_is_on_a_cuda_spaces_device():
    """Counts fitted on the CPU rank a CUDA space's words on its device (SanText+ then indexes its
    sensitive mask with the CUDA ids), in the same order."""
    counts = torch.tensor([1, 0] * 20)
    counts[7] = 5
    rank = frequency_rank(random_space(40, 3, 0).to("cuda"), counts)
    assert rank.device.type == "cuda"
    assert torch.equal(rank.cpu(), frequency_rank(random_space(40, 3, 0), counts))

def test_frequency_rank_refuses_counts_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"counts must have shape \(40,\), got \(39,\)"):
        frequency_rank(random_space(40, 3, 0), torch.ones(39))


def _row_logits() -> torch.Tensor:
    """Four unnormalised rows; the zero-probability outputs (−∞) sit first, last and inside."""
    inf = torch.inf
    return torch.tensor([[-inf, 0.0, 1.0, 0.5, -inf],
                         [-inf, -inf, 2.0, -inf, 0.0],
                         [3.0, 3.0, -inf, 1.0, -inf],
                         [-inf, -inf, -inf, 4.0, -inf]], dtype=torch.float64)


def test_sample_by_id_draws_unnormalised_rows_with_their_law(monkeypatch):
    monkeypatch.setattr(sampling, "MAX_BLOCK", 10)  # 2 distinct ids per block over 5 columns
    logits = _row_logits()
    ids = torch.tensor([2, 0, 1, 0]).repeat_interleave(8000)
    draws = sample_by_id(ids, lambda rows: logits[rows], 5, torch.Generator().manual_seed(3))
    for i in range(3):
        assert total_variation(draws[ids == i], torch.softmax(logits[i], 0)) < 0.02
    assert not bool(torch.isinf(logits[ids, draws]).any())


def test_sample_by_id_single_and_empty_inputs():
    logits = _row_logits()
    gen = torch.Generator().manual_seed(0)
    assert sample_by_id(torch.tensor([3]), lambda rows: logits[rows], 5, gen).tolist() == [3]
    assert sample_by_id(torch.tensor([3, 3]), lambda rows: logits[rows], 5, gen).tolist() == [3, 3]
    assert sample_by_id(torch.tensor([], dtype=torch.long), lambda rows: logits[rows], 5,
                        gen).shape == (0,)


def test_sample_by_id_one_token_per_block(monkeypatch):
    monkeypatch.setattr(sampling, "MAX_BLOCK", 5)  # one distinct id per block
    logits = _row_logits()
    out = sample_by_id(torch.tensor([3, 1, 3]), lambda rows: logits[rows], 5,
                       torch.Generator().manual_seed(0))
    assert out[0] == 3 == out[2] and int(out[1]) in (2, 4)


def test_sample_by_id_is_the_inverse_cdf_of_the_generators_float64_uniforms():
    logits = torch.randn(6, 9, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    ids = torch.randint(0, 6, (2000,), generator=torch.Generator().manual_seed(5))
    torch.manual_seed(123)  # the global stream must not matter
    got = sample_by_id(ids, lambda rows: logits[rows], 9, torch.Generator().manual_seed(6))
    u = torch.rand(len(ids), generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    cdf = torch.softmax(logits, 1).cumsum(1)
    want = (cdf[ids] < u.unsqueeze(1)).sum(1)
    assert torch.equal(got, want)


@pytest.mark.parametrize("uniform", [0.0, 1.0 - 2.0**-53])  # the ends of torch.rand's range
def test_sample_by_id_extreme_uniforms_stay_on_positive_probability_outputs(monkeypatch, uniform):
    logits = _row_logits()
    real_rand = torch.rand

    def rand(*size, generator=None, device=None, dtype=None):
        return torch.full_like(real_rand(*size, generator=generator, device=device, dtype=dtype),
                               uniform)

    monkeypatch.setattr(torch, "rand", rand)
    ids = torch.tensor([0, 1, 2, 3, 2, 1, 0])
    out = sample_by_id(ids, lambda rows: logits[rows], 5, torch.Generator().manual_seed(0))
    first = (logits > -torch.inf).int().argmax(1)
    last = 4 - (logits > -torch.inf).int().flip(1).argmax(1)
    assert torch.equal(out, (first if uniform == 0.0 else last)[ids])
