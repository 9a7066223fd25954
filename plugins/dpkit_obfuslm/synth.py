"""WeightSynth (ObfusLM Alg. 2), batched over clusters, and the synthesis of obfuscated tables.

For member i of cluster S: uⱼ = log softmax_j(ε·cos(yᵢ, yⱼ)/2), u' = u + Laplace(b), weights
ũ = softmax(u'). The paper sets b = (max u − min u)/ε per row. That scale depends on the row,
and the range of one vector is not the L1 distance between the vectors of two members, so it
gives no finite ε (Laplace laws with different scales have an unbounded likelihood ratio).
``calibration="exact"`` (default) uses one scale per cluster, b_S = Δ_S/ε with
Δ_S = max over member pairs of min_c ‖u⁽ⁱ⁾ − u⁽ⁱ'⁾ − c·1‖₁ — softmax ignores the shift c — so
the released weights (and any table built from them) are ε-indistinguishable within S.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpkit_obfuslm.cluster import Clusters


@dataclass(frozen=True)
class SynthWeights:
    """Per-cluster mixing weights: row i of the synthesized table is Σⱼ weights[c, a, j]·X[members[c, j]]."""

    clusters: Clusters
    weights: torch.Tensor       # [C, k_max, k_max], rows sum to 1 over valid members
    noise_scale: torch.Tensor   # [C, k_max] Laplace scale used for each member's row
    paper_scale: torch.Tensor   # [C, k_max] the paper's per-row scale (max u − min u)/ε, for reference
    sensitivity: torch.Tensor   # [C] exact shift-invariant L1 sensitivity Δ_S of the log-weights
    epsilon: float              # ε that holds within every cluster (inf for the faithful scale)
    noise: torch.Tensor | None = None  # [C, k_max, k_max] the Laplace noise added to u (tests)

    def apply(self, table: torch.Tensor) -> torch.Tensor:
        """Synthesize ``table`` (rows indexed like the clustered matrix): W·table, batched."""
        members = self.clusters.members.to(table.device)
        valid = members >= 0
        gathered = table[members.clamp(min=0)] * valid.unsqueeze(-1).to(table.dtype)
        mixed = torch.bmm(self.weights.to(table.device, table.dtype), gathered)
        out = torch.empty_like(table)
        out[members[valid]] = mixed[valid]
        return out

    def to_dense(self) -> torch.Tensor:
        """The full n×n weight matrix W on CPU (tests and small vocabularies only)."""
        members = self.clusters.members.cpu()
        weights = self.weights.cpu()
        n = self.clusters.labels.numel()
        dense = torch.zeros(n, n, dtype=weights.dtype)
        valid = members >= 0
        rows = members.unsqueeze(2).expand_as(weights)
        cols = members.unsqueeze(1).expand_as(weights)
        both = valid.unsqueeze(2) & valid.unsqueeze(1)
        dense[rows[both], cols[both]] = weights[both]
        return dense


def laplace(shape: tuple[int, ...], scale: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Laplace(0, scale) draws from ``generator`` by inverse CDF (scale broadcasts)."""
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=torch.float64) - 0.5
    u = u.clamp(-0.5 + 1e-16, 0.5 - 1e-16)
    return (-scale * torch.sign(u) * torch.log1p(-2 * u.abs())).to(torch.float32)


def log_weights(x: torch.Tensor, clusters: Clusters, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise-free log-weights u ``[C, k, k]`` (−inf on padding) and the validity mask ``[C, k]``."""
    members = clusters.members.to(x.device)
    valid = members >= 0
    unit = torch.nn.functional.normalize(x.float(), dim=1)[members.clamp(min=0)]
    sims = torch.bmm(unit, unit.transpose(1, 2))
    pair = valid.unsqueeze(2) & valid.unsqueeze(1)
    logits = (epsilon * sims / 2).masked_fill(~pair, float("-inf"))
    return torch.log_softmax(logits, dim=2).masked_fill(~pair, float("-inf")), valid


def shift_invariant_sensitivity(u: torch.Tensor, valid: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """Δ_S = max over member pairs (i, i') of min_c Σⱼ |u⁽ⁱ⁾ⱼ − u⁽ⁱ'⁾ⱼ − c| per cluster ``[C]``."""
    return torch.cat([_sensitivity_chunk(u[s:s + chunk], valid[s:s + chunk])
                      for s in range(0, u.shape[0], chunk)])


def _sensitivity_chunk(u: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    finite = torch.where(torch.isfinite(u), u, torch.zeros_like(u))
    diff = finite.unsqueeze(2) - finite.unsqueeze(1)          # [C, i, i', j]
    colmask = valid.unsqueeze(1).unsqueeze(1).expand_as(diff)
    big = torch.finfo(diff.dtype).max / 4
    lo = diff.masked_fill(~colmask, big)
    hi = diff.masked_fill(~colmask, -big)
    srt = torch.sort(torch.cat([lo, hi], dim=3), dim=3).values  # pads pair off around the centre
    median = srt[..., srt.shape[3] // 2 - 1: srt.shape[3] // 2 + 1].mean(dim=3, keepdim=True)
    dev = ((diff - median).abs() * colmask).sum(dim=3)
    pair = valid.unsqueeze(2) & valid.unsqueeze(1)
    return dev.masked_fill(~pair, 0).flatten(1).max(dim=1).values


def weight_synth(x: torch.Tensor, clusters: Clusters, epsilon: float, generator: torch.Generator,
                 calibration: str = "exact") -> SynthWeights:
    """WeightSynth(X, M, ε) for all clusters at once; ``calibration`` is ``exact`` or ``faithful``."""
    if not epsilon > 0:
        raise ValueError(f"WeightSynth: epsilon must be > 0, got {epsilon}; the paper uses 0.03–3")
    if calibration not in ("exact", "faithful"):
        raise ValueError(f"WeightSynth: calibration must be 'exact' or 'faithful', got {calibration!r}")
    u, valid = log_weights(x, clusters, epsilon)
    finite_u = torch.where(torch.isfinite(u), u, torch.zeros_like(u))
    row_range = (finite_u.masked_fill(~valid.unsqueeze(1), -1e30).amax(2)
                 - finite_u.masked_fill(~valid.unsqueeze(1), 1e30).amin(2)).clamp(min=0)
    row_range = row_range.masked_fill(~valid, 0)
    sensitivity = shift_invariant_sensitivity(u, valid)
    if calibration == "faithful":
        scale = row_range / epsilon
        achieved = float("inf") if bool((clusters.sizes > 1).any()) else 0.0
    else:
        scale = (sensitivity / epsilon).unsqueeze(1).expand_as(row_range).masked_fill(~valid, 0)
        achieved = float(epsilon)
    noise = laplace(tuple(u.shape), scale.unsqueeze(2).double(), generator)
    weights = torch.softmax(u + noise.to(u.device), dim=2)
    pair = valid.unsqueeze(2) & valid.unsqueeze(1)
    weights = weights.masked_fill(~pair, 0.0)
    return SynthWeights(clusters, weights, scale, row_range / epsilon, sensitivity, achieved, noise)
