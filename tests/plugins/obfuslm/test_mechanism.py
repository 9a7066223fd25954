"""The table mechanism: guarantee declared from the clustering, output rows mix their cluster."""

from __future__ import annotations

import pytest
import torch
from dpkit_obfuslm.cluster import embed_cluster
from dpkit_obfuslm.obfuscate import FAITHFUL_REASON, UNMIXED_REASON
from dpkit_obfuslm.synth import weight_synth

from dpkit import KAnonymityGuarantee, NoGuarantee
from dpkit.contract.plugins import get_registry
from dpkit.text.space import EmbeddingSpace


def table_mechanism(**params):
    return get_registry().build("mechanism", "obfuslm_table",
                                {"k": 4, "beta": 0.5, "epsilon": 2.0, **params})


def random_space(n=50, d=6, seed=11):
    vectors = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return EmbeddingSpace("rand", [f"t{i}" for i in range(n)], vectors)


def test_table_mechanism_guarantee_and_output():
    vectors = torch.randn(120, 8, generator=torch.Generator().manual_seed(0))
    space = EmbeddingSpace("rand", [f"t{i}" for i in range(120)], vectors)
    mech = get_registry().build("mechanism", "obfuslm_table", {"k": 4, "beta": 0.8, "epsilon": 2.0})
    g = mech.guarantee(space)
    clusters = mech.clusters(space.vectors)
    assert (g.k_requested, g.k_achieved, g.epsilon) == (4, clusters.k_achieved, 2.0)
    out = mech.privatize(space.vectors, space=space, generator=torch.Generator().manual_seed(1))
    assert out.shape == vectors.shape
    for c in range(clusters.members.shape[0]):
        rows = clusters.members[c][clusters.members[c] >= 0]
        # each output row lies in the span of its own cluster's rows
        coef = torch.linalg.lstsq(vectors[rows].T, out[rows].T).solution
        assert torch.allclose(vectors[rows].T @ coef, out[rows].T, atol=1e-4)
        assert torch.allclose(coef.sum(0), torch.ones(len(rows)), atol=1e-3)


def test_clusters_follow_the_table_content_not_its_address():
    mech = get_registry().build("mechanism", "obfuslm_table", {"k": 4, "beta": 0.8, "epsilon": 2.0})
    table = torch.randn(60, 8, generator=torch.Generator().manual_seed(0))
    first = mech.clusters(table).members.clone()
    table.copy_(torch.randn(60, 8, generator=torch.Generator().manual_seed(5)))  # same storage
    fresh = get_registry().build("mechanism", "obfuslm_table",
                                 {"k": 4, "beta": 0.8, "epsilon": 2.0}).clusters(table.clone())
    assert torch.equal(mech.clusters(table).members, fresh.members)
    assert not torch.equal(first, fresh.members)


def test_the_guarantee_is_the_k_and_epsilon_achieved_on_the_spaces_table():
    space = random_space()   # 50 rows at k = 4, β = 0.5: some clusters of 3
    clusters = embed_cluster(space.vectors, 4, 0.5)
    assert clusters.k_achieved < 4 and 0 < clusters.share_below_k < 1   # the case that tells
    assert table_mechanism().guarantee(space) == KAnonymityGuarantee(
        k_requested=4, k_achieved=clusters.k_achieved, share_below_k=clusters.share_below_k,
        epsilon=2.0)
    assert torch.equal(table_mechanism().clusters(space.vectors).members, clusters.members)
    with pytest.raises(ValueError, match="pass the EmbeddingSpace to guarantee"):
        table_mechanism().guarantee()


def test_no_finite_epsilon_without_mixing_or_with_the_papers_scale():
    assert table_mechanism(mix=False).guarantee() == NoGuarantee(UNMIXED_REASON)
    assert table_mechanism(calibration="faithful").guarantee() == NoGuarantee(FAITHFUL_REASON)


def test_privatize_draws_weight_synth_at_the_mechanisms_parameters():
    space = random_space()
    for calibration in ("exact", "faithful"):
        out = table_mechanism(calibration=calibration).privatize(
            space.vectors, generator=torch.Generator().manual_seed(3))
        weights = weight_synth(space.vectors, embed_cluster(space.vectors, 4, 0.5), 2.0,
                               torch.Generator().manual_seed(3), calibration)
        assert torch.equal(out, weights.apply(space.vectors))
    unmixed = table_mechanism(mix=False).privatize(space.vectors, generator=torch.Generator())
    assert torch.equal(unmixed, space.vectors) and unmixed is not space.vectors
    for shape in ((50,), (2, 50, 6)):
        with pytest.raises(ValueError, match=r"expects a \[V, d\] table"):
            table_mechanism().privatize(torch.zeros(shape), generator=torch.Generator())


def test_each_k_and_beta_clusters_the_same_table_afresh():
    table = random_space().vectors
    for k, beta in ((4, 0.5), (2, 0.5), (4, 0.99)):
        got = table_mechanism(k=k, beta=beta).clusters(table)
        assert torch.equal(got.members, embed_cluster(table, k, beta).members)
        assert got.k_requested == k
