"""The learned-inversion attacker's own obfuscation: drawn per cell, independent of earlier cells."""

from __future__ import annotations

import torch

from dpkit_obfuslm.inversion import own_clusters


def test_the_attackers_draws_do_not_depend_on_cells_run_before(tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    table = torch.randn(80, 6, generator=torch.Generator().manual_seed(0))
    first_gen, later_gen = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    own_clusters(table, 4, 0.9, torch.Generator().manual_seed(99))  # an earlier cell, same table
    key_a, clusters_a = own_clusters(table, 4, 0.9, first_gen)
    key_b, clusters_b = own_clusters(table, 4, 0.9, later_gen)
    assert torch.equal(key_a.forward, key_b.forward)
    assert torch.equal(clusters_a.labels, clusters_b.labels)
    assert torch.equal(first_gen.get_state(), later_gen.get_state())
    other_key, _ = own_clusters(table, 4, 0.9, torch.Generator().manual_seed(4))
    assert not torch.equal(other_key.forward, key_a.forward)  # another seed, another permutation
