"""Exact probabilities are exact: float64 distances from differences, one source for sampler and law."""

import math

import torch

from dpkit.text.space import EmbeddingSpace
from dpkit_baselines.custext import CusText
from dpkit_baselines.santext import SanText
from dpkit_baselines.sampling import exact_pairwise_l2


def glove_like_space(vocab: int = 400, dim: int = 50, seed: int = 0) -> EmbeddingSpace:
    """Large-norm float32 vectors (GloVe 50-d rows have norms up to about 10) with near twins."""
    gen = torch.Generator().manual_seed(seed)
    vectors = 3.0 * torch.randn(vocab, dim, generator=gen) + 2.0
    vectors[1::7] = vectors[0::7][: len(vectors[1::7])] + 1e-3 * torch.randn(
        len(vectors[1::7]), dim, generator=gen)
    return EmbeddingSpace("glove_like", [f"w{i}" for i in range(vocab)], vectors.float())


def direct_distances(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """‖x − y‖ from the float64 differences, one row at a time."""
    x64, t64 = x.double(), table.double()
    return torch.stack([(t64 - row).pow(2).sum(1).sqrt() for row in x64])


def test_pairwise_distances_match_direct_differences():
    space = glove_like_space()
    ids = torch.arange(0, 400, 3)
    got = exact_pairwise_l2(space.vectors[ids], space.vectors)
    want = direct_distances(space.vectors[ids], space.vectors)
    assert got[torch.arange(len(ids)), ids].abs().max() == 0.0  # a token is at distance 0
    assert float(((got - want).abs() / want.clamp_min(1e-3)).max()) < 1e-9


def test_santext_log_probabilities_are_exact():
    space = glove_like_space()
    eps = 4.0
    ids = torch.arange(0, 400, 5)
    got = SanText(SanText.Params(epsilon=eps)).output_log_probs(ids, space).double()
    want = torch.log_softmax(-eps / 2 * direct_distances(space.vectors[ids], space.vectors), 1)
    assert float((got - want).abs().max()) < 1e-10


def test_custext_law_matches_its_definition_and_its_sampler():
    space = glove_like_space(vocab=120, dim=50, seed=1)
    mech = CusText(CusText.Params(epsilon=3.0, top_k=6))
    group = mech.groups(space)
    ids = torch.arange(space.size)
    law = mech.output_log_probs(ids, space)
    for i in range(0, space.size, 11):
        members = torch.nonzero(group == group[i]).squeeze(1)
        dist = direct_distances(space.vectors[i:i + 1], space.vectors[members])[0]
        utility = 1 - (dist - dist.min()) / (dist.max() - dist.min())
        want = torch.log_softmax(1.5 * utility, 0)
        assert float((law[i, members] - want).abs().max()) < 1e-12
        assert math.isclose(float(law[i].exp().sum()), 1.0, rel_tol=1e-12)
    draws = mech.privatize(torch.full((40_000,), 0), space=space,
                           generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=space.size).double() / len(draws)
    assert float((freq - law[0].exp()).abs().max()) < 0.01
