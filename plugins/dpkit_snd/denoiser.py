"""SnD's client-side denoiser (Eq. 6–10) and the server-side token denoiser of the ablation (A.12)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class DenoiserConfig:
    """Sizes of a denoise transformer; ``emb_dim`` is the encoder's output, ``tok_dim`` its input."""

    emb_dim: int
    tok_dim: int
    d_model: int
    d_ff: int
    n_head: int
    n_layers: int
    max_tokens: int
    token_scale: float = 1.0
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"denoiser d_model={self.d_model} is not divisible by n_head="
                             f"{self.n_head}; pick n_head dividing d_model")

    def to_dict(self) -> dict:
        """Plain dict (stored next to the weights, part of the cache key)."""
        return asdict(self)


def _encoder_stack(cfg: DenoiserConfig) -> nn.TransformerEncoder:
    """Pre-LN blocks h + attn(h) + W_proj σ(W_fc γ(·)) as in Eq. 8–9, bidirectional attention."""
    layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_head, cfg.d_ff, cfg.dropout,
                                       activation="gelu", batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)


def _small_embedding(n: int, dim: int) -> nn.Embedding:
    """A learned embedding initialised like BERT's (std 0.02) so it does not drown the inputs."""
    emb = nn.Embedding(n, dim)
    nn.init.normal_(emb.weight, std=0.02)
    return emb


class SnDDenoiser(nn.Module):
    """D(e_n, X̃, Z) -> e_d: a transformer over H0 = [e_n; x̃_1..x̃_n; z_1..z_n] (Eq. 7).

    Each x̃_t and z_t share a learned position embedding so the model can pair a token with its
    noise; a segment embedding tells e_n, X̃ and Z apart. Token inputs are multiplied by
    ``token_scale`` (√d / clip bound: unit-scale coordinates), e_n is layer-normed on the way in.
    The output is read at e_n's slot (Eq. 10) and, through a final linear head, added to e_n
    (the model learns the correction).
    """

    def __init__(self, cfg: DenoiserConfig):
        super().__init__()
        self.cfg = cfg
        self.in_emb = nn.Sequential(nn.LayerNorm(cfg.emb_dim), nn.Linear(cfg.emb_dim, cfg.d_model))
        self.in_tok = nn.Linear(cfg.tok_dim, cfg.d_model)
        self.in_noise = nn.Linear(cfg.tok_dim, cfg.d_model)
        self.position = _small_embedding(cfg.max_tokens, cfg.d_model)
        self.segment = _small_embedding(3, cfg.d_model)
        self.blocks = _encoder_stack(cfg)
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.emb_dim)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, e_noisy: torch.Tensor, x_priv: torch.Tensor, noise: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        """Denoise ``e_noisy [B, emb]`` given ``x_priv``, ``noise`` ``[B, n, tok]`` and ``mask [B, n]``."""
        n = x_priv.shape[1]
        if n > self.cfg.max_tokens:
            raise ValueError(f"sequence of {n} tokens exceeds the denoiser's max_tokens="
                             f"{self.cfg.max_tokens}; raise max_tokens or truncate inputs")
        pos = self.position.weight[:n]
        seg = self.segment.weight
        h_e = self.in_emb(e_noisy).unsqueeze(1) + seg[0]
        scale = self.cfg.token_scale
        h_x = self.in_tok(x_priv * scale) + pos + seg[1]
        h_z = self.in_noise(noise * scale) + pos + seg[2]
        h = torch.cat([h_e, h_x, h_z], dim=1)
        keep = mask.bool()
        pad = ~torch.cat([torch.ones_like(keep[:, :1]), keep, keep], dim=1)
        h = self.blocks(h, src_key_padding_mask=pad)
        return e_noisy + self.head(self.norm(h[:, 0]))


class ServerTokenDenoiser(nn.Module):
    """Server-side ablation (App. A.12): X̃ -> X̂ from the privatized tokens alone, no noise input.

    Inputs are scaled by ``token_scale`` as in :class:`SnDDenoiser`; the head adds a correction.
    """

    def __init__(self, cfg: DenoiserConfig):
        super().__init__()
        self.cfg = cfg
        self.in_tok = nn.Linear(cfg.tok_dim, cfg.d_model)
        self.position = _small_embedding(cfg.max_tokens, cfg.d_model)
        self.blocks = _encoder_stack(cfg)
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.tok_dim)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x_priv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Estimate the clean token embeddings ``[B, n, tok]`` from ``x_priv`` and ``mask``."""
        n = x_priv.shape[1]
        if n > self.cfg.max_tokens:
            raise ValueError(f"sequence of {n} tokens exceeds the denoiser's max_tokens="
                             f"{self.cfg.max_tokens}; raise max_tokens or truncate inputs")
        h = self.in_tok(x_priv * self.cfg.token_scale) + self.position.weight[:n]
        h = self.blocks(h, src_key_padding_mask=~mask.bool())
        return x_priv + self.head(self.norm(h))
