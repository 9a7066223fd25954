"""Model obfuscation: vocabulary permutation, synthesized input embeddings and LM head.

The client draws a permutation π of the vocabulary (token t gets obfuscated id π[t]), permutes
the embedding table E and LM head H (E'[π[t]] = E[t]), clusters E' with EmbedCluster (so rows are
visited in the random order π induces), synthesizes Ẽ = W·E', H̃ = W·H' with WeightSynth and
installs them in the model the server receives. Only the client keeps π.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpkit import KAnonymityGuarantee, NoGuarantee, cached
from dpkit_obfuslm.cluster import Clusters, embed_cluster, members_from_labels
from dpkit_obfuslm.synth import SynthWeights, weight_synth

FAITHFUL_REASON = ("obfuslm tables with the paper's per-row Laplace scale (max u − min u of each "
                   "row, over ε): members of a cluster get noise of different scales, so the "
                   "likelihood ratio of their released rows is unbounded — no finite ε")
UNMIXED_REASON = ("obfuslm tables without WeightSynth (permutation only, the ε → ∞ limit): every "
                  "row is its token's original embedding, so KNN against the public table "
                  "recovers each token")


@dataclass(frozen=True)
class VocabKey:
    """The client's secret: ``forward[t]`` is token t's obfuscated id, ``inverse`` undoes it."""

    forward: torch.Tensor
    inverse: torch.Tensor

    @classmethod
    def random(cls, n: int, generator: torch.Generator) -> VocabKey:
        """A uniformly random permutation of ``n`` ids drawn from ``generator``."""
        forward = torch.randperm(n, generator=generator, device=generator.device).cpu()
        return cls(forward, torch.argsort(forward))

    @classmethod
    def identity(cls, n: int) -> VocabKey:
        """The plaintext key (no permutation)."""
        ids = torch.arange(n)
        return cls(ids, ids.clone())

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """Original token ids -> obfuscated ids (same shape and device)."""
        return self.forward.to(ids.device)[ids]

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """Obfuscated ids -> original token ids."""
        return self.inverse.to(ids.device)[ids]

    def permute_rows(self, table: torch.Tensor) -> torch.Tensor:
        """Rows reordered so that row π[t] holds ``table[t]``."""
        return table[self.inverse.to(table.device)]


@dataclass(frozen=True)
class ObfuscatedTables:
    """What the client sends: obfuscated (permuted, synthesized) tables, and what it keeps."""

    key: VocabKey
    embeddings: torch.Tensor            # [V, d], rows in obfuscated-id order
    head: torch.Tensor | None           # [V, d] LM head rows (None for encoders)
    weights: SynthWeights
    mixed: bool = True                  # False: permutation only, no WeightSynth

    @property
    def clusters(self) -> Clusters:
        """The clusters of obfuscated ids."""
        return self.weights.clusters

    @property
    def epsilon(self) -> float:
        """The ε that holds within each cluster (∞ for the paper's scale and for unmixed rows)."""
        return self.weights.epsilon if self.mixed else float("inf")

    def guarantee(self) -> KAnonymityGuarantee | NoGuarantee:
        """(k, ε)-anonymity with the k actually achieved and the ε that holds; a NoGuarantee
        saying why where ε is infinite (the paper's per-row scale, or no mixing at all)."""
        c = self.clusters
        if not self.mixed:
            return NoGuarantee(UNMIXED_REASON)
        if self.epsilon == float("inf"):
            return NoGuarantee(f"{FAITHFUL_REASON} (k requested {c.k_requested}, achieved "
                               f"{c.k_achieved}, {c.share_below_k:.1%} of rows below k)")
        return KAnonymityGuarantee(k_requested=c.k_requested, k_achieved=c.k_achieved,
                                   share_below_k=c.share_below_k, epsilon=self.epsilon)


def cached_clusters(emb: torch.Tensor, k: int, beta: float, chunk_rows: int) -> Clusters:
    """EmbedCluster of the permuted table, computed once per (table, permutation, k, β) and kept
    on disk: every ε of a sweep, and ``dpkit budget spec``, reuse the run's clustering."""
    key = {"table": emb, "k": k, "beta": beta, "chunk_rows": chunk_rows,
           "ties": "all at gamma, in index order"}  # clusters cached before that fix differ on ties
    parts = cached("obfuslm_clusters", key, lambda: _cluster_parts(emb, k, beta, chunk_rows),
                   disk=True)
    return Clusters(parts["labels"].to(emb.device), parts["members"].to(emb.device),
                    int(parts["k_requested"]))


def _cluster_parts(emb: torch.Tensor, k: int, beta: float, chunk_rows: int) -> dict:
    c = embed_cluster(emb, k, beta, chunk_rows)
    return {"labels": c.labels.cpu(), "members": c.members.cpu(),
            "k_requested": torch.tensor(c.k_requested)}


def obfuscate_tables(embeddings: torch.Tensor, head: torch.Tensor | None, *, k: int, beta: float,
                     epsilon: float, generator: torch.Generator, calibration: str = "exact",
                     permute: bool = True, mix: bool = True,
                     chunk_rows: int = 1024) -> ObfuscatedTables:
    """Permute, cluster (Alg. 1) and synthesize (Alg. 2) the input embeddings and LM head;
    ``mix=False`` stops after the permutation (every row its own cluster: the noiseless ceiling)."""
    n = embeddings.shape[0]
    key = VocabKey.random(n, generator) if permute else VocabKey.identity(n)
    emb = key.permute_rows(embeddings.detach().float())
    clusters = (cached_clusters(emb, k, beta, chunk_rows) if mix
                else members_from_labels(torch.arange(n, device=emb.device), k))
    weights = weight_synth(emb, clusters, epsilon, generator, calibration)
    new_head = None if head is None else weights.apply(key.permute_rows(head.detach().float()))
    return ObfuscatedTables(key, weights.apply(emb), new_head, weights, mix)


def install_tables(model: torch.nn.Module, tables: ObfuscatedTables) -> None:
    """Replace a Hugging Face model's input embeddings (and untied LM head) in place."""
    emb = model.get_input_embeddings()
    with torch.no_grad():
        emb.weight.copy_(tables.embeddings.to(emb.weight.device, emb.weight.dtype))
        out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if out is not None and tables.head is not None and out.weight is not emb.weight:
            out.weight.copy_(tables.head.to(out.weight.device, out.weight.dtype))
