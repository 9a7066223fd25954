"""Nearest-neighbour search equals brute force, honours exclusions and bounds its blocks."""

import pytest
import torch
from hypothesis import given, settings

from dpkit.text.search import VocabIndex, brute_force, nearest, nearest_ids
from dpkit.testing.strategies_tokens import search_problems


@settings(max_examples=60, deadline=None)
@given(search_problems())
def test_search_matches_brute_force(problem):
    queries, table, k, metric, block = problem
    dist, ids = nearest(queries, table, k, metric, max_block=block)
    ref_dist, _ = brute_force(queries, table, k, metric)
    assert torch.allclose(dist, ref_dist, atol=1e-4)
    own = brute_force(queries, table, table.shape[0], metric)
    full = torch.empty(queries.shape[0], table.shape[0])
    full.scatter_(1, own[1], own[0])
    assert torch.allclose(full.gather(1, ids), ref_dist, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(search_problems())
def test_exclude_never_returned_and_next_best(problem):
    queries, table, k, metric, block = problem
    if table.shape[0] < 3:
        return
    k = min(k, table.shape[0] - 2)
    g = torch.Generator().manual_seed(1)
    exclude = torch.randint(0, table.shape[0], (queries.shape[0], 2), generator=g)
    dist, ids = nearest(queries, table, k, metric, exclude=exclude, max_block=block)
    assert not (ids.unsqueeze(2) == exclude.unsqueeze(1)).any()
    _, all_ids = brute_force(queries, table, table.shape[0], metric)
    for row in range(queries.shape[0]):
        ranked = [i for i in all_ids[row].tolist() if i not in exclude[row].tolist()][:k]
        ref = brute_force(queries[row:row + 1], table[ranked], k, metric)[0]
        assert torch.allclose(dist[row], ref[0], atol=1e-4)


def test_blocks_do_not_grow_with_queries():
    index = VocabIndex(torch.randn(5000, 8), max_block=10_000)
    for n in (10, 1000, 100_000):
        q, v = index._chunks(n)
        assert q * v <= 10_000


def test_large_vocab_is_split_and_merged():
    g = torch.Generator().manual_seed(0)
    table, queries = torch.randn(1000, 5, generator=g), torch.randn(30, 5, generator=g)
    dist, ids = nearest(queries, table, 4, max_block=100)
    ref_dist, ref_ids = brute_force(queries, table, 4)
    assert torch.equal(ids, ref_ids) and torch.allclose(dist, ref_dist, atol=1e-4)


def test_exclude_self_gives_second_nearest():
    table = torch.tensor([[0.0], [1.0], [3.0]])
    assert nearest_ids(table, table, exclude=torch.arange(3)).tolist() == [1, 0, 1]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="metric"):
        VocabIndex(torch.randn(3, 2), "manhattan")
    with pytest.raises(ValueError, match="k must"):
        nearest(torch.randn(2, 2), torch.randn(3, 2), k=4)
    with pytest.raises(ValueError, match="queries must be"):
        nearest(torch.randn(2, 3), torch.randn(3, 2))
