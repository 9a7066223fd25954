"""Client-side noise correction: gated residual denoiser (Eq. 2–3, 6), down-samplers (Eq. 4–5), head."""

from __future__ import annotations

import torch
from torch import nn


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` ``[B, n, d]`` over the positions where ``mask`` ``[B, n]`` is true."""
    weights = mask.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def last_token(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The state at each sequence's last unmasked position (pooling for causal decoders)."""
    last = mask.long().sum(1).clamp_min(1) - 1
    return x[torch.arange(x.shape[0], device=x.device), last]


POOLINGS = {"mean": masked_mean, "last": last_token, "first": lambda x, mask: x[:, 0]}


class Downsampler(nn.Module):
    """One learned linear map per transmitted hidden layer, ``d -> d'`` (Eq. 4)."""

    def __init__(self, n_maps: int, dim: int, width: int) -> None:
        super().__init__()
        self.maps = nn.ModuleList(nn.Linear(dim, width) for _ in range(n_maps))

    def forward(self, states: list[torch.Tensor]) -> list[torch.Tensor]:
        """Down-sample each state with its own map."""
        if len(states) != len(self.maps):
            raise ValueError(f"Downsampler has {len(self.maps)} maps but got {len(states)} states")
        return [m(h) for m, h in zip(self.maps, states)]


class GatedResidualDenoiser(nn.Module):
    """Layer i mixes its input with hidden state i by a learned gate, then adds a transformer step.

    ``Z_i = μ_i A_{i-1} + (1 − μ_i) H_i^dn`` with ``μ_i = sigmoid(g_i)`` (Eq. 2) and
    ``A_i = A_{i-1} + T_i(Z_i)`` (Eq. 3; ``residual=False`` gives the −Res ablation ``A_i = T_i(Z_i)``).
    ``A_{-1} = E^dn``, the down-sampled *clean* embedding, which never leaves the client. The last
    output is up-sampled back to the model width (Eq. 6).
    """

    def __init__(self, n_layers: int, width: int, out_dim: int, heads: int = 4,
                 dropout: float = 0.1, residual: bool = True, gate_init: float = 0.0) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"denoiser width {width} must be divisible by heads={heads}; "
                             "change reduction or denoiser_heads")
        self.residual = residual
        self.gates = nn.Parameter(torch.full((n_layers, width), float(gate_init)))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout, batch_first=True,
                                       norm_first=True)
            for _ in range(n_layers))
        self.up = nn.Linear(width, out_dim)

    def mix(self, i: int, previous: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """Eq. 2: the gated mixture fed to transformer i."""
        mu = torch.sigmoid(self.gates[i])
        return mu * previous + (1.0 - mu) * hidden

    def forward(self, e_dn: torch.Tensor, hidden_dn: list[torch.Tensor],
                mask: torch.Tensor) -> torch.Tensor:
        """Denoised hidden state ``[B, n, out_dim]`` from ``E^dn`` and the down-sampled states."""
        if len(hidden_dn) != len(self.blocks):
            raise ValueError(f"denoiser has {len(self.blocks)} layers but got "
                             f"{len(hidden_dn)} hidden states")
        pad = ~mask.bool()
        a = e_dn
        for i, (block, h) in enumerate(zip(self.blocks, hidden_dn)):
            step = block(self.mix(i, a, h), src_key_padding_mask=pad)
            a = a + step if self.residual else step
        return self.up(a)


class TaskHead(nn.Module):
    """Pooling plus a linear classifier over the denoised states (Eq. 7)."""

    def __init__(self, dim: int, n_classes: int, pooling: str = "mean") -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {sorted(POOLINGS)}, got {pooling!r}")
        self.pool = POOLINGS[pooling]
        self.norm = nn.LayerNorm(dim)
        self.linear = nn.Linear(dim, n_classes)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Class logits ``[B, C]``."""
        return self.linear(self.norm(self.pool(states, mask)))
