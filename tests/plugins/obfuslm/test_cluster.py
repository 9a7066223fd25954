"""EmbedCluster: chunked = dense reference, cluster sizes, the achieved-k report."""

from __future__ import annotations

import pytest
import torch

from dpkit_obfuslm.cluster import embed_cluster, embed_cluster_dense, quantile_rank, topk_similar


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


def test_invalid_parameters_are_refused_with_the_exact_reason():
    with pytest.raises(ValueError) as bad_k:
        embed_cluster(torch.randn(10, 3), 0, 0.5)
    assert str(bad_k.value) == ("EmbedCluster: cluster size k must be ≥ 1, got 0; use k ≥ 2 for "
                                "anonymity")
    for beta in (1.0, -0.1):
        with pytest.raises(ValueError) as bad_beta:
            embed_cluster(torch.randn(10, 3), 3, beta)
        assert str(bad_beta.value) == (f"EmbedCluster: threshold ratio beta must lie in [0, 1), "
                                       f"got {beta}; the paper uses 0.99")


def test_the_edges_of_the_allowed_parameters_are_accepted():
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(4))
    singletons = embed_cluster(x, 1, 0.5)  # k = 1: no anonymity, but a valid partition
    assert torch.equal(singletons.labels, torch.arange(30)) and singletons.k_achieved == 1
    everyone = embed_cluster(x, 30, 0.0)  # β = 0: every row clears γ, the first row takes all
    assert torch.equal(everyone.labels, torch.zeros(30, dtype=torch.long))
    assert torch.equal(everyone.labels, embed_cluster_dense(x, 30, 0.0).labels)


@pytest.mark.parametrize("n,beta", [(21, 0.5), (41, 0.75), (11, 0.0)])
def test_a_similarity_equal_to_the_quantile_clears_it(n, beta):
    """β(n − 1) integral: γ is one of the row's similarities, and that row may join (≥ γ)."""
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(n))
    for k in (n, 4):
        fast, ref = embed_cluster(x, k, beta, chunk_rows=7), embed_cluster_dense(x, k, beta)
        assert torch.equal(fast.labels, ref.labels) and torch.equal(fast.members, ref.members)
    # the first row's cluster is every row at or above its quantile
    unit = torch.nn.functional.normalize(x, dim=1)
    sims = unit[0] @ unit.T
    gamma = torch.quantile(sims, beta)
    first = embed_cluster(x, n, beta, chunk_rows=7).labels == 0
    assert torch.equal(first, sims >= gamma) and int(first.sum()) == n - round(beta * (n - 1))


def test_member_table_lists_rows_by_index_padded_with_minus_one():
    from dpkit_obfuslm.cluster import members_from_labels

    labels = torch.tensor([0] * 7 + [1] * 7 + [2] * 3 + [3])
    labels = labels[torch.randperm(18, generator=torch.Generator().manual_seed(8))]
    c = members_from_labels(labels.int(), 7)
    assert c.members.shape == (4, 7) and c.members.dtype == torch.long
    for cluster in range(4):
        rows = torch.nonzero(labels == cluster).squeeze(1)
        assert c.members[cluster, :len(rows)].tolist() == rows.tolist()
        assert c.members[cluster, len(rows):].tolist() == [-1] * (7 - len(rows))
    assert torch.equal(c.labels, labels.long()) and c.k_requested == 7
    assert torch.equal(c.size_of_row(), torch.tensor([7, 7, 3, 1])[labels])


@pytest.mark.parametrize("k,beta", [(21, 0.5), (5, 0.5), (21, 0.3), (3, 0.9), (8, 0.0)])
def test_tied_similarities_cluster_as_alg1_does(k, beta):
    """Duplicate and zero rows: many similarities equal γ (all join) and ties go in index order."""
    g = torch.Generator().manual_seed(6)
    v = torch.randn(3, 5, generator=g)
    x = torch.cat([v[0].repeat(10, 1), v[1].repeat(11, 1), torch.zeros(4, 5), v[2].repeat(3, 1),
                   torch.randn(6, 5, generator=g)])
    x = x[torch.randperm(len(x), generator=g)]
    ref = embed_cluster_dense(x, k, beta)
    for chunk in (4, 1024):
        fast = embed_cluster(x, k, beta, chunk_rows=chunk)
        assert torch.equal(fast.labels, ref.labels) and torch.equal(fast.members, ref.members)
        assert fast.k_requested == ref.k_requested == k


@pytest.mark.parametrize("n", [12, 20, 101])
def test_quantile_near_one_reads_the_two_largest_similarities(n):
    """β(n − 1) ≥ n − 2: γ interpolates between the two largest similarities of the row."""
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(n))
    unit = torch.nn.functional.normalize(x, dim=1)
    for beta in (0.97, 0.99, 0.999):
        _, _, gamma = topk_similar(x, 3, beta, chunk_rows=5)
        assert torch.allclose(gamma, torch.quantile(unit @ unit.T, beta, dim=1), atol=1e-6)


def test_padded_candidates_never_join():
    """A zero row ties with every row (γ = 0, all n join), so its chunk is wider than the others,
    whose rows are padded; row 0's γ is negative, and the padding must not clear it."""
    g = torch.Generator().manual_seed(2)
    x = 0.1 * torch.randn(12, 4, generator=g)
    x[0, 0] += 1.0
    x[1:7, 0] -= 1.0   # mostly opposite row 0: its 0.3-quantile is negative
    x[7:10, 0] += 1.0
    x[10] = 0.0
    x[11] = torch.tensor([-1.0, 0.0, 0.0, 0.0])  # the least similar to row 0, below its γ
    ref = embed_cluster_dense(x, 12, 0.3)
    assert int(ref.labels[11]) != int(ref.labels[0])
    for chunk in (1, 5):
        assert torch.equal(embed_cluster(x, 12, 0.3, chunk_rows=chunk).labels, ref.labels)
    vals, idx, gamma = topk_similar(x, quantile_rank(12, 0.3), 0.3, chunk_rows=1)
    padded = torch.isinf(vals)  # as documented: similarity −∞, index −1
    assert bool(padded.any()) and bool((idx[padded] == -1).all()) and bool((idx[~padded] >= 0).all())


def test_wide_tables_cluster_as_alg1_does():
    """More columns than rows (ObfusLM+ clusters the hidden dims: the transposed table)."""
    x = torch.randn(12, 40, generator=torch.Generator().manual_seed(9))
    for k, beta in ((3, 0.5), (4, 0.9)):
        fast, ref = embed_cluster(x, k, beta, chunk_rows=5), embed_cluster_dense(x, k, beta)
        assert torch.equal(fast.labels, ref.labels) and torch.equal(fast.members, ref.members)
