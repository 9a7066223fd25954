"""Shared helpers for discrete token mechanisms: distances, Gumbel-max sampling, frequency ranks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import dpkit

if TYPE_CHECKING:
    import torch
else:
    torch = dpkit.lazy_import("torch")  # imported on first use: dpkit validate needs guarantee() only


MAX_BLOCK = 2**23
CANCELLATION = 1e-4
"""Below this share of ‖x‖² + ‖y‖², the expanded ‖x − y‖² is recomputed from the differences."""


def exact_pairwise_l2(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Float64 distances ``[n, V]``, exact to rounding: the fast expansion where it is accurate,
    direct differences where it cancels (a token and itself, near neighbours)."""
    x64, t64 = x.double(), table.double()
    x_sq, t_sq = (x64 * x64).sum(1, keepdim=True), (t64 * t64).sum(1).unsqueeze(0)
    sq = torch.addmm(t_sq, x64, t64.T, beta=1.0, alpha=-2.0) + x_sq
    rows, cols = torch.nonzero(sq <= CANCELLATION * (x_sq + t_sq), as_tuple=True)
    sq = sq.clamp_min_(0)
    sq[rows, cols] = ((x64[rows] - t64[cols]) ** 2).sum(1)
    return sq.sqrt_()


def gumbel_argmax(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One categorical draw per row of ``logits`` (unnormalised log-probabilities), via Gumbel-max."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    gumbel = -torch.log(-torch.log(u.clamp_min(1e-300)))
    return (logits + gumbel).argmax(dim=-1)


def row_spans(n: int, width: int) -> list[tuple[int, int]]:
    """(start, stop) row ranges whose rows times ``width`` columns stay under :data:`MAX_BLOCK`."""
    step = max(1, MAX_BLOCK // max(1, width))
    return [(start, min(start + step, n)) for start in range(0, n, step)]


def frequency_rank(space: dpkit.EmbeddingSpace, counts: torch.Tensor | None) -> torch.Tensor:
    """Ids ``[V]`` from most to least frequent: by ``counts`` when given, else table order."""
    if counts is None:
        return torch.arange(space.size, device=space.vectors.device)
    if counts.shape != (space.size,):
        raise ValueError(f"counts must have shape ({space.size},), got {tuple(counts.shape)}")
    return torch.sort(counts.to(space.vectors.device), descending=True, stable=True).indices


def sample_by_id(ids: torch.Tensor, log_probs: Callable[[torch.Tensor], torch.Tensor],
                 width: int, generator: torch.Generator) -> torch.Tensor:
    """One draw per entry of ``ids`` from the row ``log_probs(unique_ids)`` of its id.

    Rows are computed once per distinct id (in blocks), turned into CDFs offset by their row
    number so that one sorted 1-D search serves every token: a token of row r with uniform u
    lands where the offset CDF first reaches r + u.
    """
    out = torch.empty_like(ids)
    if len(ids) == 0:
        return out
    uniq, inverse = torch.unique(ids, return_inverse=True)
    u = torch.rand(len(ids), generator=generator, device=ids.device, dtype=torch.float64)
    u = u.clamp(1e-12, 1 - 1e-12)
    for start, stop in row_spans(len(uniq), width):
        mine = torch.nonzero((inverse >= start) & (inverse < stop)).squeeze(1)
        if len(mine) == 0:
            continue
        probs = log_probs(uniq[start:stop]).double().exp()
        cdf = torch.cumsum(probs, dim=1)
        cdf = cdf / cdf[:, -1:]
        rows = torch.arange(stop - start, device=ids.device, dtype=torch.float64).unsqueeze(1)
        flat = (cdf + rows).reshape(-1)
        local = (inverse[mine] - start).double()
        pos = torch.searchsorted(flat, local + u[mine]).clamp_max(flat.numel() - 1)
        out[mine] = pos - (inverse[mine] - start) * cdf.shape[1]
    return out
