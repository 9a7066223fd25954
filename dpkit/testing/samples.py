"""Two-sample checks used by the contract suites (same output law or not)."""

from __future__ import annotations

import torch
from scipy import stats

P_THRESHOLD = 1e-3


FLOAT_ROUNDING = 1e-5
"""Relative spread below which float draws count as one deterministic value (rounding of float32
sums differs between devices and batch sizes)."""


def same_distribution(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor,
                      threshold: float = P_THRESHOLD) -> bool:
    """Whether draws ``a`` and ``b`` (``[n, …]``) for the same input row ``x`` look alike.

    Integer outputs (tokens): chi-square homogeneity of the output counts. Float outputs: KS tests
    of the distance to ``x`` and of the first coordinate, Bonferroni-combined. Deterministic
    outputs must be equal.
    """
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.shape[1:] != b.shape[1:]:
        return False
    if not a.is_floating_point():
        values, inverse = torch.unique(torch.cat([a.reshape(len(a), -1)[:, 0],
                                                  b.reshape(len(b), -1)[:, 0]]),
                                       return_inverse=True)
        if len(values) == 1:
            return True
        counts = torch.zeros(2, len(values), dtype=torch.long)
        counts[0].index_add_(0, inverse[: len(a)], torch.ones(len(a), dtype=torch.long))
        counts[1].index_add_(0, inverse[len(a):], torch.ones(len(b), dtype=torch.long))
        keep = counts.sum(0) > 0
        return stats.chi2_contingency(counts[:, keep].numpy())[1] > threshold
    fa, fb = a.reshape(len(a), -1).double(), b.reshape(len(b), -1).double()
    if torch.equal(fa.std(0), torch.zeros_like(fa[0])) and torch.equal(fb.std(0),
                                                                       torch.zeros_like(fb[0])):
        return torch.equal(fa[0], fb[0])
    rounding = FLOAT_ROUNDING * (1.0 + float(torch.cat([fa, fb]).abs().max()))
    if all(float((f - f.mean(0)).abs().max()) <= rounding for f in (fa, fb)):
        # deterministic but for float rounding (e.g. a mix of identical rows on another device)
        return float((fa.mean(0) - fb.mean(0)).abs().max()) <= rounding
    ref = x.detach().cpu().reshape(-1).double()
    tests = [(fa[:, 0], fb[:, 0])]
    if ref.numel() == fa.shape[1]:
        tests.append(((fa - ref).norm(dim=1), (fb - ref).norm(dim=1)))
    p = min(stats.ks_2samp(u.numpy(), v.numpy()).pvalue for u, v in tests)
    return p * len(tests) > threshold
