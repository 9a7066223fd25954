"""Mutual information I(X; X̃) = H(X̃) − H(Z) by Kozachenko–Leonenko k-NN entropies (App. A.6)."""

from __future__ import annotations

import torch


def knn_log_distance(x: torch.Tensor, k: int, chunk: int = 1024) -> torch.Tensor:
    """Mean log distance from each row of ``x [N, d]`` to its k-th nearest other row."""
    if not 1 <= k < x.shape[0]:
        raise ValueError(f"k-NN entropy needs 1 ≤ k < N; got k={k}, N={x.shape[0]} — use more "
                         "samples or a smaller k")
    x = x.double()
    out = []
    for start in range(0, x.shape[0], chunk):
        d = torch.cdist(x[start:start + chunk], x)
        rows = torch.arange(d.shape[0], device=x.device)
        d[rows, rows + start] = float("inf")
        out.append(d.kthvalue(k, dim=1).values)
    return torch.cat(out).clamp_min(1e-300).log().mean()


def mutual_information(x: torch.Tensor, x_priv: torch.Tensor, k: int = 3) -> float:
    """Eq. 22: (d/N)Σ log ε_X̃(i) − (d/N)Σ log ε_Z(i), with Z = X̃ − X (nats; same N and k cancel
    the other Kozachenko–Leonenko terms). Near zero when X̃ carries no information about X."""
    if x.shape != x_priv.shape or x.ndim != 2:
        raise ValueError(f"x and x_priv must both be [N, d]; got {tuple(x.shape)} and "
                         f"{tuple(x_priv.shape)}")
    d = x.shape[1]
    noise = x_priv - x
    if float(noise.abs().max()) == 0.0:
        return float("inf")
    return float(d * (knn_log_distance(x_priv, k) - knn_log_distance(noise, k)))
