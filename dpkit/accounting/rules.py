"""Pure composition rules for metric DP (dχ) and (k, ε)-anonymity.

- η-dχ mechanisms compose additively: releasing the same tokens through mechanisms with
  η₁, η₂, … gives (Σηᵢ)-dχ. A per-token guarantee over a document of n tokens gives, for two
  documents x, x', ε = η·Σᵢ d(xᵢ, x'ᵢ).
- (k, ε)-anonymity: ε composes additively across releases (basic composition of ε-DP weight
  releases). **k has no composition theorem**: the reported k is the minimum achieved k over
  releases, which describes each release on its own, not what an adversary who links several
  releases can narrow a token down to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpkit.accounting.guarantees import KAnonymityGuarantee, MetricDpGuarantee
from dpkit.base.errors import AccountingError

if TYPE_CHECKING:
    import torch

K_COMPOSITION_NOTE = ("k has no composition theorem: k_achieved is the smallest anonymity set of "
                      "any single release, not a bound for an adversary who links releases")


def metric_key(g: MetricDpGuarantee) -> tuple[str, str, str]:
    """The (metric, space, unit) a metric-DP guarantee is measured in; only equal keys add up."""
    return (g.metric, g.space, g.unit)


def compose_metric(spends: Iterable[tuple[MetricDpGuarantee, int]]) -> dict[tuple[str, str, str], float]:
    """Total η per (metric, space, unit): Σ count·η (exactly rounded sum)."""
    terms: dict[tuple[str, str, str], list[float]] = {}
    for g, count in spends:
        terms.setdefault(metric_key(g), []).append(g.eta * count)
    return {key: math.fsum(values) for key, values in terms.items()}


def document_epsilon(eta: float, distances: Any) -> float | list[float]:
    """ε = η·Σᵢ dᵢ for per-token distances ``[n]`` (one document pair) or ``[b, n]`` (b pairs)."""
    import torch

    d = torch.as_tensor(distances, dtype=torch.float64)
    if d.numel() and (not torch.isfinite(d).all() or (d < 0).any()):
        raise AccountingError("distances must be finite and non-negative; got "
                              f"min={d.min().item()!r}, max={d.max().item()!r}")
    if d.ndim > 2:
        raise AccountingError(f"distances must have shape [n] or [b, n], got {tuple(d.shape)}")
    total = eta * d.sum(dim=-1) if d.ndim else eta * d
    return float(total) if total.ndim == 0 else [float(v) for v in total.cpu()]


def table_diameter(vectors: torch.Tensor, chunk: int = 4096) -> float:
    """Largest L2 distance between two rows of an embedding table, in chunks (no V×V matrix)."""
    import torch

    if vectors.ndim != 2 or vectors.shape[0] == 0:
        raise AccountingError(f"expected a non-empty [V, d] table, got shape {tuple(vectors.shape)}")
    x = vectors.to(torch.float64)
    sq = (x * x).sum(dim=1)
    best = torch.zeros((), dtype=torch.float64, device=x.device)
    for start in range(0, x.shape[0], chunk):
        block = x[start:start + chunk]
        d2 = sq[start:start + chunk, None] + sq[None, :] - 2.0 * block @ x.T
        best = torch.maximum(best, d2.max())
    return float(best.clamp_min(0).sqrt())


@dataclass(frozen=True)
class KAnonymityTotal:
    """Composed (k, ε)-anonymity: min achieved/requested k, worst share below k, summed ε."""

    k_achieved: int
    k_requested: int
    share_below_k: float
    epsilon: float
    releases: int
    note: str = K_COMPOSITION_NOTE


def compose_k_anonymity(spends: Iterable[tuple[KAnonymityGuarantee, int]]) -> KAnonymityTotal | None:
    """Compose (k, ε) spends: ε adds up (count times each), k is the minimum over releases."""
    items = [(g, c) for g, c in spends if c > 0]
    if not items:
        return None
    return KAnonymityTotal(
        k_achieved=min(g.k_achieved for g, _ in items),
        k_requested=min(g.k_requested for g, _ in items),
        share_below_k=max(g.share_below_k for g, _ in items),
        epsilon=math.fsum(g.epsilon * c for g, c in items),
        releases=sum(c for _, c in items),
    )
