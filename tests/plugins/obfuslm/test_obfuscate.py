"""The client's secret and what it sends: the vocabulary key is a permutation drawn from the run's
noise generator, the tables are Alg. 1 + Alg. 2 of the permuted rows, and their guarantee states
the k and ε actually achieved."""

from __future__ import annotations

import copy

import dpkit.base.cache as cache
import dpkit_obfuslm.obfuscate as obfuscate
import pytest
import torch
from dpkit_obfuslm.cluster import embed_cluster
from dpkit_obfuslm.obfuscate import (
    FAITHFUL_REASON,
    UNMIXED_REASON,
    VocabKey,
    cached_clusters,
    install_tables,
    obfuscate_tables,
)
from dpkit_obfuslm.synth import weight_synth

from dpkit import KAnonymityGuarantee, NoGuarantee
from dpkit.models import tiny_causal

# 50 rows at k = 4, β = 0.5: Alg. 1 leaves some clusters of 3, so k achieved (3) < k requested (4)
# and the share below k (0.12) is neither 0 nor 1: a guarantee built from the wrong one shows.
N, DIM, K, BETA, EPSILON = 50, 6, 4, 0.5, 2.0


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture()
def table() -> torch.Tensor:
    return torch.randn(N, DIM, generator=seeded(11))


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """An empty clustering cache, on disk and in memory, so every call clusters afresh."""
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_MEMO", cache.ProcessCache("test memo", "this test's memo", 32))
    return tmp_path


# ---- VocabKey: the client's secret ----------------------------------------------------------

def test_the_key_is_a_permutation_drawn_from_the_given_generator():
    generator = seeded(5)
    key = VocabKey.random(1000, generator)
    ids = torch.arange(1000)
    assert torch.equal(key.forward.sort().values, ids)                 # a permutation
    assert torch.equal(key.forward[key.inverse], ids) and torch.equal(key.inverse[key.forward], ids)
    assert torch.equal(key.forward, torch.randperm(1000, generator=seeded(5)))  # the generator's draw
    assert not torch.equal(generator.get_state(), seeded(5).get_state())      # which it consumed
    assert torch.equal(VocabKey.random(1000, seeded(5)).forward, key.forward)
    assert not torch.equal(VocabKey.random(1000, seeded(6)).forward, key.forward)
    assert key.forward.device.type == "cpu" and key.inverse.device.type == "cpu"


def test_the_identity_key_maps_every_id_and_row_to_itself(table):
    key = VocabKey.identity(N)
    ids = torch.randint(0, N, (3, 7), generator=seeded(1))
    assert torch.equal(key.forward, torch.arange(N)) and torch.equal(key.inverse, torch.arange(N))
    assert torch.equal(key.encode(ids), ids) and torch.equal(key.decode(ids), ids)
    assert torch.equal(key.permute_rows(table), table)


def test_ids_and_rows_are_permuted_consistently(table):
    key = VocabKey.random(N, seeded(2))
    ids = torch.randint(0, N, (4, 9), generator=seeded(3))
    sent = key.encode(ids)
    assert sent.shape == ids.shape and not torch.equal(sent, ids)
    assert torch.equal(key.decode(sent), ids) and torch.equal(key.encode(key.decode(ids)), ids)
    assert torch.equal(sent, key.forward[ids])
    # the obfuscated id of token t indexes t's row in the permuted table
    assert torch.equal(key.permute_rows(table)[sent], table[ids])
    assert torch.equal(key.permute_rows(table)[key.forward], table)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_key_is_drawn_from_a_cuda_generator_and_kept_on_the_cpu():
    key = VocabKey.random(N, torch.Generator(device="cuda").manual_seed(5))
    drawn = torch.randperm(N, generator=torch.Generator(device="cuda").manual_seed(5), device="cuda")
    assert key.forward.device.type == "cpu" and torch.equal(key.forward, drawn.cpu())
    assert torch.equal(key.forward[key.inverse], torch.arange(N))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_ids_and_rows_keep_their_device_wherever_the_key_lives_cuda(table):
    """The key maps ids and rows on their own device, a key on the CPU or on the GPU alike."""
    cpu_key = VocabKey.random(N, seeded(2))
    ids = torch.randint(0, N, (4, 9), generator=seeded(3))
    for key in (cpu_key, VocabKey(cpu_key.forward.cuda(), cpu_key.inverse.cuda())):
        for device in ("cpu", "cuda"):
            sent, back = key.encode(ids.to(device)), key.decode(ids.to(device))
            rows = key.permute_rows(table.to(device))
            assert sent.device.type == back.device.type == rows.device.type == device
            assert torch.equal(sent.cpu(), cpu_key.encode(ids))
            assert torch.equal(back.cpu(), cpu_key.decode(ids))
            assert torch.equal(rows.cpu(), cpu_key.permute_rows(table))


# ---- obfuscate_tables: Alg. 1 + Alg. 2 of the permuted rows -----------------------------------

def expected_tables(table, head, seed, calibration="exact"):
    """The tables by definition: key from the generator, then WeightSynth from the same stream."""
    generator = seeded(seed)
    key = VocabKey.random(N, generator)
    permuted = key.permute_rows(table)
    weights = weight_synth(permuted, embed_cluster(permuted, K, BETA), EPSILON, generator,
                           calibration)
    return key, weights.apply(permuted), weights.apply(key.permute_rows(head))


def test_the_tables_are_the_synthesized_permuted_rows(table, fresh_cache):
    head = torch.randn(N, DIM, generator=seeded(12))
    tables = obfuscate_tables(table, head, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7))
    key, embeddings, new_head = expected_tables(table, head, 7)
    assert torch.equal(tables.key.forward, key.forward)
    assert torch.equal(tables.embeddings, embeddings) and torch.equal(tables.head, new_head)
    assert tables.mixed and not torch.equal(tables.embeddings, key.permute_rows(table))
    other = obfuscate_tables(table, head, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(8))
    assert not torch.equal(other.key.forward, tables.key.forward)
    faithful = obfuscate_tables(table, head, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7),
                                calibration="faithful")
    assert torch.equal(faithful.embeddings, expected_tables(table, head, 7, "faithful")[1])


def test_without_permute_the_key_is_the_identity(table, fresh_cache):
    tables = obfuscate_tables(table, None, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7),
                              permute=False)
    assert torch.equal(tables.key.forward, torch.arange(N)) and tables.head is None
    assert torch.equal(tables.clusters.labels, embed_cluster(table, K, BETA).labels)


def test_unmixed_tables_put_every_row_in_its_own_cluster(table):
    tables = obfuscate_tables(table, None, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7),
                              mix=False)
    assert torch.equal(tables.clusters.labels, torch.arange(N)) and tables.clusters.k_requested == K
    assert tables.guarantee() == NoGuarantee(UNMIXED_REASON)


# ---- the guarantee: the k and ε actually achieved ---------------------------------------------

def test_the_guarantee_states_the_k_and_epsilon_achieved(table, fresh_cache):
    tables = obfuscate_tables(table, None, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7))
    clusters = embed_cluster(tables.key.permute_rows(table), K, BETA)
    assert clusters.k_achieved < K and 0 < clusters.share_below_k < 1   # the case that tells
    assert tables.guarantee() == KAnonymityGuarantee(
        k_requested=K, k_achieved=clusters.k_achieved, share_below_k=clusters.share_below_k,
        epsilon=EPSILON)


def test_the_faithful_scale_states_no_epsilon_and_the_k_achieved(table, fresh_cache):
    tables = obfuscate_tables(table, None, k=K, beta=BETA, epsilon=EPSILON, generator=seeded(7),
                              calibration="faithful")
    c = tables.clusters
    g = tables.guarantee()
    assert isinstance(g, NoGuarantee) and g.reason.startswith(FAITHFUL_REASON)
    assert (f"(k requested {K}, achieved {c.k_achieved}, {c.share_below_k:.1%} of rows below k)"
            in g.reason)


# ---- cached_clusters: Alg. 1, computed once and kept on disk ---------------------------------

def test_cached_clusters_are_embed_cluster_and_kept_on_disk(table, fresh_cache, monkeypatch):
    direct = embed_cluster(table, K, BETA, 16)
    got = cached_clusters(table, K, BETA, 16)
    assert torch.equal(got.labels, direct.labels) and torch.equal(got.members, direct.members)
    assert got.k_requested == K and isinstance(got.k_requested, int)
    assert list((fresh_cache / "shared" / "obfuslm_clusters").glob("*.pt"))
    # a later process (empty memo) reads the disk copy instead of clustering again
    monkeypatch.setattr(cache, "_MEMO", cache.ProcessCache("later", "a later process's memo", 32))
    monkeypatch.setattr(obfuscate, "_cluster_parts", lambda *a: pytest.fail("clustered again"))
    again = cached_clusters(table, K, BETA, 16)
    assert torch.equal(again.labels, direct.labels) and again.k_requested == K


def test_cached_clusters_differ_with_k_beta_and_table(table, fresh_cache):
    base = cached_clusters(table, K, BETA, 1024)
    other_k = cached_clusters(table, 2, BETA, 1024)
    assert other_k.k_requested == 2 and other_k.members.shape[1] == 2 < base.members.shape[1]
    other_beta = cached_clusters(table, K, 0.99, 1024)
    assert torch.equal(other_beta.labels, embed_cluster(table, K, 0.99).labels)
    other_table = table.flip(0).contiguous()
    assert torch.equal(cached_clusters(other_table, K, BETA, 1024).labels,
                       embed_cluster(other_table, K, BETA).labels)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cached_clusters_come_back_on_a_cuda_tables_device(table, fresh_cache):
    """The clusters kept on the CPU are handed back on the table's device (the same clusters)."""
    on_cpu = cached_clusters(table, K, BETA, 16)
    on_cuda = cached_clusters(table.cuda(), K, BETA, 16)  # the same content: the cached entry
    assert on_cuda.labels.device.type == on_cuda.members.device.type == "cuda"
    assert torch.equal(on_cuda.labels.cpu(), on_cpu.labels)
    assert torch.equal(on_cuda.members.cpu(), on_cpu.members)


# ---- install_tables: what the server receives -----------------------------------------------

def test_install_replaces_the_table_and_an_untied_head():
    split = tiny_causal(hidden_size=16, num_layers=1)
    model = copy.deepcopy(split.server)
    emb, out = model.get_input_embeddings(), model.get_output_embeddings()
    out.weight = torch.nn.Parameter(out.weight.detach().clone())      # untie the head
    n, d = emb.weight.shape
    tables = obfuscate_tables(emb.weight.detach(), out.weight.detach(), k=1, beta=0.5,
                              epsilon=1.0, generator=seeded(4), mix=False)
    install_tables(model, tables)
    assert torch.equal(emb.weight, tables.embeddings) and torch.equal(out.weight, tables.head)
    tied = copy.deepcopy(split.server)
    assert tied.get_output_embeddings().weight is tied.get_input_embeddings().weight
    head = torch.randn(n, d, generator=seeded(5))
    install_tables(tied, obfuscate.ObfuscatedTables(tables.key, tables.embeddings, head,
                                                    tables.weights, False))
    assert torch.equal(tied.get_input_embeddings().weight, tables.embeddings)  # head not over it


def test_install_needs_no_output_layer(table):
    class Bare(torch.nn.Module):
        """A model with an input table and no get_output_embeddings."""

        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(N, DIM)

        def get_input_embeddings(self):
            return self.table

    bare = Bare()
    tables = obfuscate_tables(table, None, k=1, beta=0.5, epsilon=1.0, generator=seeded(4),
                              mix=False)
    install_tables(bare, tables)
    assert torch.equal(bare.table.weight, tables.embeddings)
