"""White-box noise laws: the noise a mechanism adds, tested against the law its guarantee declares.

A token mechanism is audited black-box on the token it releases, whose lower bound stays far
below the claim; the noise it adds to the embedding before decoding is where a scale error
shows. A mechanism *exposes* its noise with three methods (the built-in dχ mechanisms, token and
contextual, have them):

* ``clean_vectors(x, *, space)`` — the rows ``[m, d]`` the noise is added to;
* ``noisy_vectors(x, *, space, generator)`` — those rows plus the noise, before any decoding;
* ``decode(noisy, x, *, space)`` — the release; ``privatize(x) ≡ decode(noisy_vectors(x), x)``.

The declared law follows from the guarantee: a ``MetricDpGuarantee(η, "l2")`` per token is the
multivariate Laplace density ∝ exp(−η‖z‖) (radius ~ Gamma(d, 1/η), direction uniform on the
sphere); per sequence, η is divided by the mechanism's ``noise_contribution()`` (dχ-STENCIL's
window bound C).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy import stats

from dpkit.accounting.guarantees import MetricDpGuarantee


def exposes_noise(mech: Any) -> bool:
    """Whether ``mech`` has ``clean_vectors``, ``noisy_vectors`` and ``decode``."""
    return all(callable(getattr(mech, name, None))
               for name in ("clean_vectors", "noisy_vectors", "decode"))


def declared_laplace_eta(mech: Any, space: Any) -> float | None:
    """η of the L2 Laplace noise the guarantee of ``mech`` implies, or None (no such claim, or the
    release is clipped so its noise is not the declared law's)."""
    guarantee = mech.guarantee(space)
    if not isinstance(guarantee, MetricDpGuarantee) or guarantee.metric != "l2":
        return None
    if getattr(getattr(mech, "params", None), "clip_bound", None) is not None:
        return None
    if guarantee.unit in ("token", ""):
        return float(guarantee.eta)
    contribution = getattr(mech, "noise_contribution", None)
    return float(guarantee.eta) / float(contribution()) if callable(contribution) else None


def exposed_noise(mech: Any, x: torch.Tensor, space: Any, generator: torch.Generator) -> torch.Tensor:
    """The noise ``[m, d]`` ``mech`` adds to ``x``: ``noisy_vectors − clean_vectors`` (float64)."""
    noisy = mech.noisy_vectors(x, space=space, generator=generator)
    clean = mech.clean_vectors(x, space=space)
    return (noisy.double() - clean.double()).cpu()


def laplace_l2_pvalue(noise: torch.Tensor | np.ndarray, eta: float) -> float:
    """p-value that rows ``[n, d]`` follow the L2 Laplace density ∝ exp(−η‖z‖): KS of the radius
    against Gamma(d, 1/η) and of the first direction coordinate against its uniform-sphere law
    ((u₁ + 1)/2 ~ Beta((d−1)/2, (d−1)/2); for d = 1, a fair sign), Bonferroni over the two."""
    if len(noise) == 0:
        return 1.0
    z = np.asarray(noise, dtype=float).reshape(len(noise), -1)
    n, d = z.shape
    radius = np.linalg.norm(z, axis=1)
    p_radius = stats.kstest(radius, stats.gamma(a=d, scale=1.0 / eta).cdf).pvalue
    unit = z[:, 0] / np.maximum(radius, 1e-300)
    if d == 1:
        p_direction = stats.binomtest(int((unit > 0).sum()), n, 0.5).pvalue
    else:
        a = (d - 1) / 2
        p_direction = stats.kstest((unit + 1) / 2, stats.beta(a, a).cdf).pvalue
    return float(min(1.0, 2 * min(p_radius, p_direction)))


def gaussian_pvalue(noise: torch.Tensor | np.ndarray, sigma: float) -> float:
    """p-value that values are N(0, σ²): two-sided chi-square test of the variance and z-test of
    the mean, Bonferroni over the two."""
    x = np.asarray(noise, dtype=float).ravel() / sigma
    if x.size == 0:
        return 1.0
    chi = float((x ** 2).sum())
    p_var = 2 * min(stats.chi2.cdf(chi, x.size), stats.chi2.sf(chi, x.size))
    p_mean = 2 * stats.norm.sf(abs(x.sum()) / math.sqrt(x.size))
    return float(min(1.0, 2 * min(p_var, p_mean)))


def laplace_pvalue(noise: torch.Tensor | np.ndarray, scale: np.ndarray | float) -> float:
    """p-value that values are Laplace(0, ``scale``) (per value; KS of value/scale against Laplace(1))."""
    x = np.asarray(noise, dtype=float).ravel() / np.asarray(scale, dtype=float).ravel()
    if x.size == 0:
        return 1.0
    return float(stats.kstest(x, stats.laplace.cdf).pvalue)


def simulated_power(p_value: Callable[[np.ndarray], float], draw: Callable[[np.random.Generator], np.ndarray],
                    level: float, trials: int = 200, seed: int = 0) -> float:
    """Share of ``trials`` samples ``draw(rng)`` (from a wrong law) that ``p_value`` rejects at
    ``level``: the power of the test against that law, by simulation."""
    rng = np.random.default_rng(seed)
    return sum(p_value(draw(rng)) < level for _ in range(trials)) / trials


def reference_laplace_l2(rng: np.random.Generator, n: int, d: int, eta: float) -> np.ndarray:
    """``[n, d]`` L2 Laplace draws from numpy (independent of the torch sampler under test)."""
    direction = rng.standard_normal((n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * rng.gamma(d, 1.0 / eta, size=(n, 1))
