"""EmbedCluster: chunked = dense reference, cluster sizes, the achieved-k report."""

from __future__ import annotations

import pytest
import torch

from dpkit_obfuslm.cluster import embed_cluster, embed_cluster_dense, topk_similar


def crafted_table() -> torch.Tensor:
    """15 background rows around dim 1 and 5 near-duplicate rows on dim 0 (the last 5 rows)."""
    g = torch.Generator().manual_seed(3)
    background = torch.cat([torch.zeros(15, 1), torch.ones(15, 1),
                            0.4 * torch.randn(15, 14, generator=g)], 1)
    tight = torch.zeros(5, 16)
    tight[:, 0] = 1.0
    tight[:, 1:] = 0.01 * torch.randn(5, 15, generator=g)
    return torch.cat([background, tight])


@pytest.mark.parametrize("k,beta,chunk", [(5, 0.9, 37), (3, 0.99, 64), (8, 0.5, 1000)])
def test_chunked_equals_dense_reference(k, beta, chunk):
    x = torch.randn(300, 16, generator=torch.Generator().manual_seed(k))
    fast = embed_cluster(x, k, beta, chunk_rows=chunk)
    ref = embed_cluster_dense(x, k, beta)
    assert torch.equal(fast.labels, ref.labels)
    assert torch.equal(fast.members, ref.members)


def test_quantile_matches_torch_quantile():
    x = torch.randn(257, 8, generator=torch.Generator().manual_seed(1))
    unit = torch.nn.functional.normalize(x, dim=1)
    for beta in (0.0, 0.5, 0.9, 0.99):
        _, _, gamma = topk_similar(x, 5, beta, chunk_rows=50)
        expected = torch.quantile(unit @ unit.T, beta, dim=1)
        assert torch.allclose(gamma, expected, atol=1e-6)


def test_partition_and_size_bound():
    x = torch.randn(500, 12, generator=torch.Generator().manual_seed(2))
    c = embed_cluster(x, 7, 0.95, chunk_rows=128)
    members = c.members[c.members >= 0]
    assert torch.equal(torch.sort(members).values, torch.arange(500))   # each row exactly once
    assert int(c.sizes.max()) <= 7
    assert torch.equal(c.labels[c.members[:, 0]], torch.arange(c.members.shape[0]))


def test_outlier_group_leaves_a_singleton_and_the_report_says_so():
    # β = 0.8 over 20 rows: only the 4 most similar rows (the row itself included) clear γ.
    # The 5 tight rows are visited last: the first takes 3 mates, the fifth finds only taken
    # mates above its threshold and stays alone — Alg. 1 produces a cluster smaller than k.
    c = embed_cluster(crafted_table(), 4, 0.8, chunk_rows=6)
    assert torch.equal(c.labels, embed_cluster_dense(crafted_table(), 4, 0.8).labels)
    tight_sizes = c.size_of_row()[15:]
    assert sorted(tight_sizes.tolist()) == [1, 4, 4, 4, 4]
    sizes = torch.bincount(c.labels)
    assert c.k_achieved == 1 == int(sizes.min())
    assert c.share_below_k == pytest.approx(float(sizes[sizes < 4].sum()) / 20)
    assert c.share_below_k >= 1 / 20


def test_invalid_parameters_are_explained():
    with pytest.raises(ValueError, match="beta"):
        embed_cluster(torch.randn(10, 3), 3, 1.0)
    with pytest.raises(ValueError, match="cluster size k"):
        embed_cluster(torch.randn(10, 3), 0, 0.5)
