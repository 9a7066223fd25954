"""The ObfusLM table obfuscation as a dpkit Mechanism (domain ``"table"``).

Rows keep their token order (the vocabulary permutation is a separate client-side step) and are
clustered in index order, so the clustering — and with it the achieved k — is known before any
noise is drawn: ``guarantee(space)`` clusters the space's table, ``privatize`` draws WeightSynth.
"""

from __future__ import annotations

from typing import ClassVar

import torch

import dpkit
from dpkit import KAnonymityGuarantee, NoGuarantee, cached
from dpkit_obfuslm.cluster import Clusters, embed_cluster
from dpkit_obfuslm.obfuscate import FAITHFUL_REASON, UNMIXED_REASON
from dpkit_obfuslm.synth import weight_synth
from dpkit_obfuslm.params import TableParams


class ObfusTable(dpkit.Component):
    """EmbedCluster(k, β) + WeightSynth(ε) applied to an embedding table ``[V, d]``."""

    name: ClassVar[str] = "obfuslm_table"
    Params: ClassVar[type[TableParams]] = TableParams
    domain: ClassVar[str] = "table"

    def clusters(self, table: torch.Tensor) -> Clusters:
        """The (deterministic) clustering of ``table``, memoized by the table's content."""
        key = {"table": table, "k": self.params.k, "beta": self.params.beta}
        return cached("obfuslm-table-clusters", key,
                      lambda: embed_cluster(table.float(), self.params.k, self.params.beta))

    def guarantee(self, space=None) -> KAnonymityGuarantee | NoGuarantee:
        """(k, ε)-anonymity with the k achieved on ``space``'s table (needs the space); ε = ∞
        with the reason for the paper's per-row scale and without mixing."""
        if not self.params.mix:
            return NoGuarantee(UNMIXED_REASON)
        if self.params.calibration == "faithful":
            return NoGuarantee(FAITHFUL_REASON)
        if space is None:
            raise ValueError("obfuslm_table: the achieved k depends on the table; pass the "
                             "EmbeddingSpace to guarantee(space)")
        c = self.clusters(space.vectors)
        return KAnonymityGuarantee(k_requested=self.params.k, k_achieved=c.k_achieved,
                                   share_below_k=c.share_below_k, epsilon=self.params.epsilon)

    def privatize(self, x: torch.Tensor, *, space=None, generator: torch.Generator) -> torch.Tensor:
        """The synthesized table: row t is a noisy mix of t's cluster (same shape as ``x``)."""
        if x.ndim != 2:
            raise ValueError(f"obfuslm_table expects a [V, d] table, got shape {tuple(x.shape)}")
        if not self.params.mix:
            return x.float().clone()
        weights = weight_synth(x, self.clusters(x), self.params.epsilon, generator,
                               self.params.calibration)
        return weights.apply(x.float())
