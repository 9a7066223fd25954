"""Audit inputs: a seeded test vocabulary, worst-case-seeking input pairs, batched sampling."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpkit.audit.claims import Claim
from dpkit.text.space import EmbeddingSpace

TARGET_CLAIMS = (0.5, 1.0, 2.0, 4.0)
SEQUENCE_LENGTH = 5


def make_test_space(vocab: int = 48, dim: int = 6, seed: int = 0) -> EmbeddingSpace:
    """A generated vocabulary ``w000…`` with seeded Gaussian vectors (the audit's default space)."""
    gen = torch.Generator().manual_seed(seed)
    vectors = torch.randn(vocab, dim, generator=gen)
    tokens = [f"w{i:03d}" for i in range(vocab)]
    return EmbeddingSpace(f"audit-test-{vocab}x{dim}-s{seed}", tokens, vectors, lowercase=True,
                          stop_words=frozenset(tokens[:2]))


@dataclass
class AuditPair:
    """Two neighbouring inputs, their L2 distance and the ε the claim allows between them."""

    x: torch.Tensor
    x_prime: torch.Tensor
    distance: float
    claimed: float
    label: str


def sequence_unit(claim: Claim) -> bool:
    """Whether one application covers several tokens (inputs are then whole sequences)."""
    return claim.unit not in ("token", "")


def _embed_sequence(space: EmbeddingSpace, first: torch.Tensor, second: torch.Tensor,
                    gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Two sequences of :data:`SEQUENCE_LENGTH` rows equal except the middle row."""
    ids = torch.randint(space.size, (SEQUENCE_LENGTH,), generator=gen)
    base = space.vectors.cpu()[ids].clone()
    mid = SEQUENCE_LENGTH // 2
    a, b = base.clone(), base.clone()
    a[mid], b[mid] = first, second
    return a, b


def _token_sequence(space: EmbeddingSpace, i: int, j: int,
                    gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(space.size, (SEQUENCE_LENGTH,), generator=gen)
    mid = SEQUENCE_LENGTH // 2
    a, b = ids.clone(), ids.clone()
    a[mid], b[mid] = i, j
    return a, b


def token_pair_indices(space: EmbeddingSpace, claim: Claim, limit: int = 256,
                       allowed: torch.Tensor | None = None) -> list[tuple[int, int]]:
    """Token pairs whose claimed ε is closest to each target (metric DP), or the nearest,
    median and farthest pairs (constant-ε claims); only pairs in ``allowed`` ``[m, m]``."""
    if allowed is not None:
        limit = min(limit, allowed.shape[0])
    vecs = space.vectors[:limit].double().cpu()
    dist = torch.cdist(vecs, vecs)
    n = dist.shape[0]
    dist.fill_diagonal_(float("inf"))
    if allowed is not None:
        dist[~allowed.cpu()] = float("inf")
    if not torch.isfinite(dist).any():
        return []
    chosen: list[tuple[int, int]] = []
    finite = dist[torch.isfinite(dist)]
    if claim.kind == "metric":
        for target in TARGET_CLAIMS:
            flat = (dist * claim.eta - target).abs().argmin().item()
            chosen.append(divmod(flat, n))
    for q in ((0.0, 0.02, 0.1, 0.3) if claim.kind == "metric" else (0.0, 0.5, 1.0)):
        value = torch.quantile(finite, q)
        flat = (dist - value).abs().argmin().item()
        chosen.append(divmod(flat, n))
    return list(dict.fromkeys((min(a, b), max(a, b)) for a, b in chosen))


def select_pairs(domain: str, space: EmbeddingSpace, claim: Claim, gen: torch.Generator,
                 sensitivity: float = 1.0, allowed: torch.Tensor | None = None) -> list[AuditPair]:
    """Input pairs at several distances: synthetic pairs at chosen claims plus real token pairs
    (token pairs restricted to ``allowed``, e.g. one anonymity set, when given)."""
    seq = sequence_unit(claim)
    pairs: list[AuditPair] = []
    vecs = space.vectors.detach().cpu().float()
    if domain in ("embedding", "table"):
        if claim.kind == "metric":
            lengths = [t / claim.eta for t in TARGET_CLAIMS for _ in range(2)]
        else:
            lengths = [sensitivity] * 8
        for k, length in enumerate(lengths):
            base = vecs[torch.randint(space.size, (1,), generator=gen).item()]
            if k % 2:  # axis-aligned: worst case for coordinate-wise mechanisms
                direction = torch.zeros_like(base)
                direction[torch.randint(base.numel(), (1,), generator=gen).item()] = 1.0
                kind = "e"
            else:
                direction = torch.randn(base.shape, generator=gen)
                direction /= direction.norm()
                kind = "u"
            other = base + length * direction
            pairs.append(_pair(space, base, other, claim, seq, gen, f"x=row+{length:.3g}·{kind}"))
        for i, j in token_pair_indices(space, claim)[:2] if claim.kind == "metric" else []:
            pairs.append(_pair(space, vecs[i], vecs[j], claim, seq, gen,
                               f"{space.tokens[i]!r} vs {space.tokens[j]!r}"))
        return pairs
    for i, j in token_pair_indices(space, claim, allowed=allowed):
        distance = float((vecs[i] - vecs[j]).norm())
        if seq:
            a, b = _token_sequence(space, i, j, gen)
        else:
            a, b = torch.tensor([i]), torch.tensor([j])
        pairs.append(AuditPair(a, b, distance, claim.epsilon_at(distance),
                               f"{space.tokens[i]!r} vs {space.tokens[j]!r}"))
    return pairs


def _pair(space: EmbeddingSpace, a: torch.Tensor, b: torch.Tensor, claim: Claim, seq: bool,
          gen: torch.Generator, label: str) -> AuditPair:
    distance = float((a - b).norm())
    if seq:
        a, b = _embed_sequence(space, a, b, gen)
    else:
        a, b = a.unsqueeze(0), b.unsqueeze(0)
    return AuditPair(a, b, distance, claim.epsilon_at(distance), label)


def draw(mechanism: object, inputs: torch.Tensor, n: int, space: EmbeddingSpace,
         generator: torch.Generator, per_row: bool) -> torch.Tensor:
    """``n`` outputs of the mechanism on ``inputs``, flattened to ``[n, …]``.

    Per-token mechanisms (``per_row``) get one batched call on ``n`` copies of the single row;
    sequence mechanisms are called once per draw (their rows are not independent).
    """
    device = space.vectors.device
    inputs = inputs.to(device)
    if per_row:
        batch = inputs.expand(n, *inputs.shape[1:]).contiguous()
        out = mechanism.privatize(batch, space=space, generator=generator)
        return out.reshape(n, -1)
    outs = [mechanism.privatize(inputs, space=space, generator=generator).reshape(-1)
            for _ in range(n)]
    return torch.stack(outs)
