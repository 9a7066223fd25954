"""The table mechanism: guarantee declared from the clustering, output rows mix their cluster."""

from __future__ import annotations

import torch

from dpkit.contract.plugins import get_registry
from dpkit.text.space import EmbeddingSpace


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
