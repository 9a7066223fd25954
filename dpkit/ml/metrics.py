"""Utility metrics shared by defenses: accuracy, ROC AUC, Spearman ρ, embedding similarity."""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

import numpy as np

from dpkit.base.lazy import lazy_import

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_import("torch")  # the evidence layer reads mean_over_seeds without torch


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def accuracy(predicted, truth) -> float:
    """Share of positions where ``predicted`` equals ``truth``."""
    p, t = _numpy(predicted), _numpy(truth)
    if p.shape != t.shape or p.size == 0:
        raise ValueError(f"accuracy needs two non-empty arrays of one shape, got {p.shape} and {t.shape}")
    return float((p == t).mean())


def auc(scores, truth) -> float:
    """ROC AUC: binary (scores ``[N]`` or ``[N, 2]``) or one-vs-rest macro average (``[N, C]``)."""
    from sklearn.metrics import roc_auc_score

    s, t = _numpy(scores), _numpy(truth)
    if s.ndim == 2 and s.shape[1] == 2:
        s = s[:, 1]
    if s.ndim == 1:
        return float(roc_auc_score(t, s))
    return float(roc_auc_score(t, s, multi_class="ovr", average="macro", labels=np.arange(s.shape[1])))


def spearman(a, b) -> float:
    """Spearman rank correlation of two equal-length sequences."""
    from scipy.stats import spearmanr

    a, b = _numpy(a), _numpy(b)
    if a.shape != b.shape or a.size < 2:
        raise ValueError(f"spearman needs two sequences of one length ≥ 2, got {a.shape} and {b.shape}")
    return float(spearmanr(a, b).statistic)


def mse(x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean squared error between two tensors of one shape."""
    return float(((x.float() - y.float()) ** 2).mean())


def mean_cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    """Mean row-wise cosine similarity between ``x`` and ``y`` ``[N, d]``."""
    return float(torch.nn.functional.cosine_similarity(x.float(), y.float(), dim=-1).mean())


def mean_over_seeds(values: list[float]) -> float:
    """Mean of one metric over seeds, independent of order: any NaN (or +∞ with -∞) gives NaN."""
    if not values:
        raise ValueError("mean_over_seeds needs at least one value")
    if any(math.isnan(v) for v in values):
        return math.nan
    infinite = {v for v in values if math.isinf(v)}
    if infinite:
        return infinite.pop() if len(infinite) == 1 else math.nan
    return math.fsum(values) / len(values)
