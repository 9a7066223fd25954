"""Goodness of fit in high dimension: statistics whose law a declared radial density fixes.

When ``log_density(x, ·)`` depends on y only through r = ‖y − x‖ (Laplace dχ, Gaussian), the
declared law fixes two things whatever the dimension d:

- the **norm** r has density ∝ r^{d−1}·exp(log_density) (Gamma(d, 1/η) for the L2 Laplace), tested
  with Kolmogorov–Smirnov against that CDF, computed numerically from the declared density;
- the **direction** (y − x)/r is uniform on the sphere and independent of r: its L1 norm is
  compared (two-sample KS) with that of uniform directions, overall and for the draws with the
  smaller and the larger half of the norms.

Half-scale noise moves the norm; per-coordinate draws move the direction (and the norm).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

RADIAL_PROBES = 4
RADIAL_TOL = 1e-6
GRID = 20_000
REFERENCE_DIRECTIONS = 20_000


def _log_density_along(log_density, x: torch.Tensor, direction: torch.Tensor,
                       radii: torch.Tensor) -> torch.Tensor:
    """log p(x + r·direction | x) for each radius r (float64, on the CPU)."""
    xs = x.reshape(1, -1).double().expand(len(radii), -1)
    ys = xs + radii.double().to(x.device)[:, None] * direction.double().to(x.device)[None, :]
    return log_density(xs, ys).double().cpu()


def radial_profile(log_density, x: torch.Tensor, scale: float, gen: torch.Generator):
    """``r -> log p`` if the declared density is radial around ``x`` (checked on probes), else None."""
    d = x.numel()
    probes = torch.randn(RADIAL_PROBES, d, generator=gen, dtype=torch.float64)
    probes = probes / probes.norm(dim=1, keepdim=True)
    radii = torch.tensor([0.1, 0.5, 1.0, 2.0, 5.0], dtype=torch.float64) * scale
    x64 = x.reshape(-1).double()
    try:
        values = torch.stack([_log_density_along(log_density, x64, u, radii) for u in probes])
    except Exception:  # noqa: BLE001 — a density that cannot be probed is simply not radial here
        return None
    spread = (values - values[0]).abs().max()
    if not torch.isfinite(values).all() or spread > RADIAL_TOL * (1 + values.abs().max()):
        return None
    u = probes[0]
    return lambda r: _log_density_along(log_density, x64, u, r)


def norm_cdf(profile, d: int, scale: float):
    """Numerical CDF of r = ‖y − x‖ under the declared radial density (trapezoid on a grid)."""
    hi = scale
    for _ in range(60):  # grow until the radial density has fallen e^-50 below its peak
        r = torch.linspace(0, hi, 2_000, dtype=torch.float64)[1:]
        log_g = (d - 1) * torch.log(r) + profile(r)
        if log_g[-1] < log_g.max() - 50 and int(log_g.argmax()) < len(r) - 1:
            break
        hi *= 2
    r = torch.linspace(0, hi, GRID, dtype=torch.float64)
    log_g = torch.xlogy(torch.tensor(d - 1.0, dtype=torch.float64), r) + profile(r)
    g = torch.exp(log_g - log_g.max()).numpy()
    grid = r.numpy()
    cdf = np.concatenate([[0.0], np.cumsum((g[1:] + g[:-1]) / 2 * np.diff(grid))])
    cdf /= cdf[-1]
    return lambda values: np.interp(values, grid, cdf, left=0.0, right=1.0)


def _direction_statistic(directions: np.ndarray) -> np.ndarray:
    return np.abs(directions).sum(axis=1) / math.sqrt(directions.shape[1])


def radial_law_pvalues(log_density, x: torch.Tensor, draws: torch.Tensor,
                       seed: int = 0) -> dict[str, float]:
    """p-values that ``draws`` under ``x`` follow the declared radial law (empty if not radial)."""
    noise = (draws.double() - x.reshape(1, -1).double().to(draws.device)).cpu()
    radii = noise.norm(dim=1)
    keep = radii > 0
    noise, radii = noise[keep], radii[keep]
    if len(radii) < 20:
        return {}
    gen = torch.Generator().manual_seed(seed)
    scale = float(radii.median())
    profile = radial_profile(log_density, x, scale, gen)
    if profile is None:
        return {}
    d = noise.shape[1]
    cdf = norm_cdf(profile, d, scale)
    out = {"norm": float(stats.kstest(radii.numpy(), cdf).pvalue)}
    if d >= 2:
        reference = torch.randn(REFERENCE_DIRECTIONS, d, generator=gen, dtype=torch.float64)
        ref_stat = _direction_statistic((reference / reference.norm(dim=1, keepdim=True)).numpy())
        stat = _direction_statistic((noise / radii[:, None]).numpy())
        small = radii.numpy() <= np.median(radii.numpy())
        for name, mask in (("direction", slice(None)), ("direction|small norm", small),
                           ("direction|large norm", ~small)):
            out[name] = float(stats.ks_2samp(stat[mask], ref_stat).pvalue)
    return out
