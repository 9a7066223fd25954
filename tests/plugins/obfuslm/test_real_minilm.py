"""The real MiniLM table (fetched once into $DPKIT_CACHE): clustering and KNN+ on real vectors."""

from __future__ import annotations

import pytest
import torch

from dpkit.contract.plugins import get_registry
from dpkit.text.search import nearest
from dpkit_obfuslm.cluster import embed_cluster, embed_cluster_dense
from dpkit_obfuslm.obfuscate import obfuscate_tables

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def minilm():
    return get_registry().build("model", "minilm", {}).load(torch.device("cpu"))


def test_real_table_clusters_like_the_dense_reference(minilm):
    table = minilm.embedding_table[1000:2500].float()   # 1,500 real word-piece rows
    fast = embed_cluster(table, 3, 0.99, chunk_rows=256)
    assert torch.equal(fast.labels, embed_cluster_dense(table, 3, 0.99).labels)
    assert int(fast.sizes.max()) <= 3


def test_real_table_obfuscation_hides_most_tokens_from_knn(minilm):
    table = minilm.embedding_table[:6000].float()
    tables = obfuscate_tables(table, None, k=5, beta=0.99, epsilon=1.0,
                              generator=torch.Generator().manual_seed(0))
    ids = torch.arange(2000, 6000)                       # ordinary word pieces
    _, guess = nearest(tables.embeddings[tables.key.encode(ids)], table, k=1, metric="cosine")
    top1 = float((guess[:, 0] == ids).float().mean())
    below = tables.clusters.size_of_row()[tables.key.encode(ids)] < 5
    assert 0.0 < top1 < 0.8
    # tokens left in singleton clusters are not protected at all: KNN recovers them
    alone = tables.clusters.size_of_row()[tables.key.encode(ids)] == 1
    if bool(alone.any()):
        assert bool((guess[alone, 0] == ids[alone]).all())
    assert tables.guarantee().share_below_k == pytest.approx(tables.clusters.share_below_k)
    assert float(below.float().mean()) < 0.5


def test_real_norm_gains_give_obfuslm_plus_sigma_star_away(minilm):
    """Why ObfusLM+'s second synthesis is recorded with ε = ∞: on the real model every hidden
    dimension's LayerNorm gains are distinct, so the released (permuted) gains name σ*."""
    import copy

    from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden
    from tests.plugins.obfuslm.test_hidden import recover_sigma_from_norm_gains

    released = copy.deepcopy(minilm.server)
    key = hidden_key(minilm.embedding_table, k=10, beta=0.99, epsilon=3.0,
                     generator=torch.Generator().manual_seed(0))
    obfuscate_hidden(released, key)
    assert torch.equal(recover_sigma_from_norm_gains(minilm.server, released), key.source)
