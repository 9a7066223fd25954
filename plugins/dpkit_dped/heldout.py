"""How the student scores answers held out of its training: fold-in, on an independent half.

The student chooses its number of epochs on answers it did not train on. A held-out answer is one
query word's target, and a word's input vector only trains on its own answers, so in the
selection run a held-out word keeps its start vector while the shared output layer co-adapts with
the trained words' vectors. Scoring it that way measures how well the output layer serves a stale
vector, not what training on more epochs gives a trained word: on 20 Newsgroups the noiseless
DPED student (seed 2) stopped at epoch 24 with 79 % of the ensemble's calibrated gain where 100
epochs give 88 %. **Fold-in** (as held-out documents are scored in topic models) fits each held-out
word's input vector to its answer with the output layer frozen — the word's own Eq. 3 terms,
a convex problem in that vector — and scores the answer after that.

Fitted and scored on the same noisy answer, fold-in would fit part of the noise and look better
than it is. **Gaussian data fission** (Leiner, Duan, Wasserman and Ramdas, *Data fission:
splitting a single data point*, JASA 2023) splits each released answer y (the teachers' mean plus
N(0, s²) per entry, s public) into f = y + Z and g = y − Z with a fresh Z ~ N(0, s²): f and g are
independent, each the mean plus N(0, 2s²). The fold-in fits f, the score reads g; so a held-out
row's loss difference between two epochs is still linear in noise independent of everything the
row's score was chosen with, and the signed-rank test of :mod:`dpkit_dped.selection` stays exact.
Without noise (s = 0) f = g = y. Only released answers, the public model and public numbers enter:
post-processing, nothing on the ledger.
"""

from __future__ import annotations

import torch

from dpkit_dped.selection import row_output_losses

FOLD_IN_STEPS = 15  # L-BFGS iterations per fold-in (each word's problem is convex and 100-d)


def fission(noisy: torch.Tensor, noise_std: float, generator: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(f, g): two independent halves of the Gaussian release ``noisy`` (std ``noise_std`` per
    entry), each with std ``noise_std·√2``; both equal ``noisy`` when the std is 0."""
    if noise_std == 0:
        return noisy.clone(), noisy.clone()
    extra = noise_std * torch.randn(noisy.shape, generator=generator, device=generator.device)
    extra = extra.to(noisy.device)
    return noisy + extra, noisy - extra


def fit_vectors(out: torch.Tensor, bias: torch.Tensor, start: torch.Tensor, rows: torch.Tensor,
                targets: torch.Tensor, *, loss_kind: str, output_weight: float,
                hidden: torch.Tensor | None = None, hidden_mask: torch.Tensor | None = None,
                hidden_weight: float = 0.0, steps: int = FOLD_IN_STEPS) -> torch.Tensor:
    """Input vectors ``[U, d]`` of U words, from ``start``, fitted to their terms with the output
    layer frozen: answer j belongs to word ``rows[j]`` (an index into ``start``) and contributes
    its output loss against ``targets[j]`` and, where ``hidden_mask[j]``, the hidden term."""
    out, bias = out.detach(), bias.detach()
    vectors = start.detach().clone().requires_grad_(True)
    solver = torch.optim.LBFGS([vectors], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def objective() -> torch.Tensor:
        solver.zero_grad()
        mine = vectors[rows]
        loss = output_weight * row_output_losses(mine @ out.T + bias, targets, loss_kind).sum()
        if hidden is not None and hidden_weight > 0:
            squared = ((mine - hidden) ** 2).sum(dim=-1)
            mask = torch.ones_like(squared) if hidden_mask is None else hidden_mask.to(squared)
            loss = loss + hidden_weight * (squared * mask).sum()
        loss.backward()
        return loss

    solver.step(objective)
    return vectors.detach()


def fold_in_losses(out: torch.Tensor, bias: torch.Tensor, start: torch.Tensor,
                   fit_targets: torch.Tensor, score_targets: torch.Tensor, *, loss_kind: str,
                   output_weight: float, hidden: torch.Tensor | None = None,
                   hidden_mask: torch.Tensor | None = None, hidden_weight: float = 0.0,
                   steps: int = FOLD_IN_STEPS) -> torch.Tensor:
    """Per-row output loss against ``score_targets`` after fitting each row's input vector, from
    ``start`` ``[n, d]``, to its own terms — output loss against ``fit_targets`` and, where
    ``hidden_mask`` (default: every row with ``hidden``), ``hidden_weight``·‖h − hidden‖² — with
    the output layer ``out`` ``[V, d]`` and ``bias`` ``[V]`` frozen."""
    vectors = fit_vectors(out, bias, start, torch.arange(len(start), device=start.device),
                          fit_targets, loss_kind=loss_kind, output_weight=output_weight,
                          hidden=hidden, hidden_mask=hidden_mask, hidden_weight=hidden_weight,
                          steps=steps)
    with torch.no_grad():
        return output_weight * row_output_losses(vectors @ out.T + bias, score_targets, loss_kind)
