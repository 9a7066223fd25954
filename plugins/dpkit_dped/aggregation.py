"""DPED's noisy multi-layer aggregation (Alg. 1, phase 2), batched over queries.

Teachers are first put in one coordinate system: each teacher's vectors are rotated onto a public
reference space by orthogonal Procrustes (a function of that teacher alone, so one changed document
still moves only one teacher's rotated, clipped vectors). Averaging independently trained skip-gram
spaces without this is meaningless: each has its own arbitrary rotation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpkit_dped.privacy import NoisePlan
from dpkit_dped.skipgram import WordModel


def clip_rows(x: torch.Tensor, clip: float) -> torch.Tensor:
    """Scale each row to L2 norm at most ``clip``."""
    norms = x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return x * torch.clamp(clip / norms, max=1.0)


def procrustes_align(source: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``source`` rotated by the orthogonal map that best fits its unit rows onto ``reference``'s."""
    a = torch.nn.functional.normalize(source, dim=-1)
    b = torch.nn.functional.normalize(reference, dim=-1)
    u, _, vt = torch.linalg.svd(a.T @ b)
    return source @ (u @ vt)


def teacher_votes(teachers: list[WordModel], queries: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Each teacher's top predicted context word (the query word itself excluded), ``[N, M]``."""
    out = torch.empty(len(teachers), len(queries), dtype=torch.long, device=queries.device)
    for i, t in enumerate(teachers):
        for s in range(0, len(queries), chunk):
            q = queries[s:s + chunk]
            logits = t.context_logits(q)
            logits[torch.arange(len(q), device=q.device), q] = float("-inf")
            out[i, s:s + chunk] = logits.argmax(dim=-1)
    return out


def teacher_probability_sum(teachers: list[WordModel], queries: torch.Tensor,
                            chunk: int = 1024) -> torch.Tensor:
    """Sum over teachers of each teacher's predicted context distribution (softmax), ``[M, V]``.

    Soft targets: every teacher contributes a point of the probability simplex per query, so one
    teacher changing moves the sum by at most √2 in L2 and each entry by at most 1 — the same
    sensitivities as a one-hot vote.
    """
    vocab = teachers[0].vectors.shape[0]
    out = torch.zeros(len(queries), vocab, device=queries.device)
    for t in teachers:
        for s in range(0, len(queries), chunk):
            out[s:s + chunk] += t.context_logits(queries[s:s + chunk]).softmax(dim=-1)
    return out


def vote_histogram(votes: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Vote counts ``[M, V]`` from teacher votes ``[N, M]``."""
    hist = torch.zeros(votes.shape[1], vocab_size, device=votes.device)
    hist.scatter_add_(1, votes.T, torch.ones_like(votes.T, dtype=hist.dtype))
    return hist


@dataclass
class Aggregate:
    """What the aggregator releases per query: the answered mask, the noisy mean vectors and the
    noisy summed teacher outputs (``soft``, hard targets keep only their noisy argmax ``labels``)."""

    queries: torch.Tensor
    answered: torch.Tensor
    hidden: torch.Tensor | None
    labels: torch.Tensor
    soft: torch.Tensor | None = None

    @property
    def abstain_share(self) -> float:
        """Share of queries the threshold rejected."""
        return 1.0 - float(self.answered.float().mean())


def aggregate(teacher_vectors: torch.Tensor | None, summed: torch.Tensor, plan: NoisePlan, *,
              threshold: float, clip: float, generator: torch.Generator) -> Aggregate:
    """Confident-GNMax (or the faithful noiseless threshold) plus the noisy clipped mean.

    ``summed`` ``[M, V]`` is the teachers' summed outputs: the vote histogram (``plan.target``
    ``hard``: the release is its noisy argmax) or the sum of their probability vectors (``soft``:
    the release is the whole noisy sum). The threshold check compares the top entry of ``summed``
    plus N(0, σ₁²) with ``threshold`` (sensitivity 1 in both cases). ``teacher_vectors`` is
    ``[N, M, d]`` (aligned, not yet clipped) or ``None`` for labels-only PATE. Noise std comes from
    ``plan``; randomness only from ``generator``.
    """
    dev = summed.device
    top = summed.max(dim=-1).values
    if plan.sigma_threshold is not None:
        top = top + plan.sigma_threshold * torch.randn(top.shape, generator=generator, device=dev)
    elif not plan.faithful:
        raise ValueError("the plan has no threshold noise and is not the faithful threshold; "
                         "refusing to compare the noiseless top count")
    answered = top >= threshold
    noisy = summed + plan.sigma_votes * torch.randn(summed.shape, generator=generator, device=dev)
    hidden = None
    if teacher_vectors is not None:
        if plan.sigma_hidden is None:
            raise ValueError("teacher vectors were given but the noise plan has no hidden-layer σ")
        mean = clip_rows(teacher_vectors, clip).mean(dim=0)
        hidden = mean + plan.sigma_hidden * torch.randn(mean.shape, generator=generator, device=dev)
    queries = torch.arange(len(summed), device=dev)
    return Aggregate(queries, answered, hidden, noisy.argmax(dim=-1),
                     noisy if plan.target == "soft" else None)
