"""Per-sample clipped gradient sums for embedding tables without batch × vocabulary × dim tensors.

A sample (one document) touches only the rows of the ids it contains, so its gradient with respect
to a ``[V, d]`` table is sparse: the gradient of each gathered row, summed over repeated ids. This
module computes those per-sample row gradients with one backward pass over the gathered rows,
their exact per-sample L2 norm over all tables (repeated ids are summed *before* the norm, as in
the dense gradient), clips each sample to norm ``C`` (Opacus' factor ``min(1, C / (‖g‖ + 1e-6))``)
and scatters the clipped sum back into dense ``[V, d]`` tables. Cost: O(B · ids · d) instead of
O(B · V · d); the result equals Opacus' per-sample clipping (tested against it and a naive loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

OPACUS_EPS = 1e-6


def clip_factors(norms: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Opacus' per-sample clipping factor ``min(1, C / (‖g‖ + 1e-6))``."""
    return (max_norm / (norms + OPACUS_EPS)).clamp(max=1.0)


def row_gradients(ids: torch.Tensor, grads: torch.Tensor, vocab_size: int):
    """Per-sample sparse gradient of one table: (unique sample·V + row keys, summed rows ``[U, d]``).

    ``ids`` is ``[B, ...]`` (row ids each sample gathered), ``grads`` ``[B, ..., d]`` (the gradient
    of the summed loss with respect to each gathered row).
    """
    batch = ids.shape[0]
    sample = torch.arange(batch, device=ids.device).view(batch, *([1] * (ids.dim() - 1)))
    keys = (sample * vocab_size + ids).reshape(-1)
    unique, inverse = torch.unique(keys, return_inverse=True)
    summed = torch.zeros(len(unique), grads.shape[-1], dtype=grads.dtype, device=grads.device)
    summed.index_add_(0, inverse, grads.reshape(-1, grads.shape[-1]))
    return unique, summed


def clipped_gradient_sum(ids: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                         vocab_size: int, max_norm: float) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Σ_b clip(g_b) for each table (dense ``[V, d]``) and the per-sample norms ``[B]`` before clipping.

    ``ids[t]`` / ``grads[t]`` describe table ``t`` as in :func:`row_gradients`; all tables share
    one norm per sample (the norm of the sample's whole gradient).
    """
    batch = ids[0].shape[0]
    parts = [row_gradients(i, g, vocab_size) for i, g in zip(ids, grads)]
    squared = torch.zeros(batch, dtype=grads[0].dtype, device=grads[0].device)
    for keys, rows in parts:
        squared.index_add_(0, keys // vocab_size, rows.pow(2).sum(-1))
    norms = squared.sqrt()
    factors = clip_factors(norms, max_norm)
    sums = []
    for keys, rows in parts:
        table = torch.zeros(vocab_size, rows.shape[-1], dtype=rows.dtype, device=rows.device)
        table.index_add_(0, keys % vocab_size, rows * factors[keys // vocab_size].unsqueeze(-1))
        sums.append(table)
    return sums, norms


def gathered_clipped_sum(tables: Sequence[torch.Tensor], ids: Sequence[torch.Tensor],
                         loss_of_rows: Callable[..., torch.Tensor], max_norm: float):
    """Gather ``tables[t][ids[t]]``, evaluate per-sample losses ``[B]`` with ``loss_of_rows``, and
    return (clipped gradient sums per table, per-sample norms, per-sample losses)."""
    rows = [t.detach()[i].requires_grad_(True) for t, i in zip(tables, ids)]
    losses = loss_of_rows(*rows)
    grads = torch.autograd.grad(losses.sum(), rows)
    sums, norms = clipped_gradient_sum(ids, grads, tables[0].shape[0], max_norm)
    return sums, norms, losses.detach()
