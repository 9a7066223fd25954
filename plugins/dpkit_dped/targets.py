"""The student's targets from the released aggregate: post-processing only, nothing private read.

Every function here sees the noisy releases, the public model and the planned noise std (a public
number), so whatever it computes costs nothing on the ledger.

- **Soft targets** (the default): the noisy sum of the teachers' probability vectors divided by the
  number of teachers, an unbiased estimate of the ensemble's mean distribution.
- **Shrinkage** (``wiener``): each released vector y is pulled toward the public model's
  prediction μ for the same query, y ↦ μ + λ·(y − μ), by the Wiener factor λ = S / (S + d·s²),
  where d·s² is the energy of the noise (known: s is the planned std) and S the energy of the
  signal, estimated from the release as ‖y − μ‖² less a high quantile of the noise energy s²·χ²_d,
  cut at 0. The quantile is the one-sided 3σ level (0.135 %) Bonferroni-corrected over the rows
  shrunk together, so that pure noise lets *any* row of a run through with probability 0.135 %: a
  row that passes by chance carries λ times the full noise, which at small ε is orders of
  magnitude above a probability over 3,000 words. Estimated as ‖y − μ‖² − d·s² instead, this is the
  positive-part James–Stein estimate, which keeps a fraction ≈ √(2/d) of pure noise in about half
  the rows. Under heavy noise the target is the
  public model's own prediction, so a student started from the public model has nothing to move
  towards; without noise λ = 1 and the target is the teachers' own aggregate.
- **Hidden target** (``public_norm``): teacher vectors are clipped to norm C before averaging (the
  sensitivity needs it), which shrinks them below the scale the output layer was trained for. The
  direction of the (shrunk) noisy mean is kept and rescaled to the norm of the public model's
  vector of the same word.
"""

from __future__ import annotations

import torch
from scipy import stats

from dpkit_dped.aggregation import clip_rows


FALSE_SIGNAL = 0.00135  # chance that pure noise lets any row through: the one-sided 3σ level


def shrinkage_factor(noisy: torch.Tensor, prior: torch.Tensor, noise_std: float) -> torch.Tensor:
    """The Wiener factor λ ∈ [0, 1] of each row of ``noisy`` ``[n, d]`` (std ``noise_std`` per
    entry) toward ``prior``'s, from its conservatively estimated signal energy (module docstring)."""
    if noise_std == 0:
        return torch.ones(noisy.shape[:-1], device=noisy.device)
    diff = noisy - prior
    rows, d = max(1, diff[..., 0].numel()), diff.shape[-1]
    level = float(stats.chi2.isf(FALSE_SIGNAL / rows, d)) * noise_std ** 2
    signal = (diff.pow(2).sum(dim=-1) - level).clamp_min(0.0)
    return signal / (signal + d * noise_std ** 2)


def shrink_to_prior(noisy: torch.Tensor, prior: torch.Tensor, noise_std: float) -> torch.Tensor:
    """Rows of ``noisy`` shrunk toward ``prior``'s by :func:`shrinkage_factor`."""
    if noise_std == 0:
        return noisy.clone()
    return prior + shrinkage_factor(noisy, prior, noise_std).unsqueeze(-1) * (noisy - prior)


def soft_targets(released: torch.Tensor, teachers: int, noise_std: float,
                 prior: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean teacher distribution estimated from the noisy sum ``released`` ``[n, V]``, and
    which rows carry information (were not shrunk all the way to the prior).

    ``noise_std`` is σ of the sum; divided by ``teachers`` it is the std of the mean. With a
    ``prior`` (the public model's distributions of the same queries) the estimate is shrunk toward
    it; without, it is the plain unbiased estimate (entries may be negative under noise).
    """
    mean = released / teachers
    if prior is None:
        return mean, torch.ones(len(mean), dtype=torch.bool, device=mean.device)
    factor = shrinkage_factor(mean, prior, noise_std / teachers)
    return prior + factor.unsqueeze(-1) * (mean - prior), factor > 0


def nonnegative(target: torch.Tensor) -> torch.Tensor:
    """A noisy target made a distribution for cross-entropy: negatives cut to 0, rows renormalized
    (a row with no positive entry becomes uniform)."""
    kept = target.clamp_min(0.0)
    total = kept.sum(dim=-1, keepdim=True)
    uniform = torch.full_like(kept, 1.0 / kept.shape[-1])
    return torch.where(total > 0, kept / total.clamp_min(torch.finfo(kept.dtype).tiny), uniform)


def hidden_targets(released: torch.Tensor, public_vectors: torch.Tensor, *, clip: float,
                   noise_std: float, shrink: bool, rescale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's hidden target from the noisy clipped means ``released`` ``[n, d]``, and which
    rows carry information.

    ``shrink``: toward the public vectors clipped the same way (std ``noise_std``);
    ``rescale``: the direction kept, the length set to the public vector's norm.
    """
    target = released
    informative = torch.ones(len(released), dtype=torch.bool, device=released.device)
    if shrink:
        anchor = clip_rows(public_vectors, clip)
        factor = shrinkage_factor(released, anchor, noise_std)
        target, informative = anchor + factor.unsqueeze(-1) * (released - anchor), factor > 0
    if rescale:
        target = (torch.nn.functional.normalize(target, dim=-1)
                  * public_vectors.norm(dim=-1, keepdim=True))
    return target, informative
