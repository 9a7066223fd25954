"""Training the denoisers on public text with synthetic noise (Eq. 11–12), cached as safetensors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from dpkit_snd.client import SplitClient
from dpkit_snd.denoiser import DenoiserConfig, ServerTokenDenoiser, SnDDenoiser
from dpkit_snd.privatize import privatize_tokens

WEIGHTS = "denoiser.safetensors"


@dataclass(frozen=True)
class TrainPlan:
    """How to train one denoiser: passes over the public data, batch size, learning rate."""

    epochs: int
    batch_size: int
    lr: float


def cache_key(fields: dict) -> str:
    """A short stable hash of everything that determines a trained denoiser."""
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def load_or_train(ctx, kind: str, fields: dict, model: nn.Module,
                  train: Callable[[nn.Module], None]) -> tuple[nn.Module, bool]:
    """Load ``model``'s weights from the artifact cache keyed by ``fields``, else train and save.

    Returns the model (in eval mode) and whether the cache was hit.
    """
    key = cache_key(fields)
    path: Path = ctx.artifact_dir(kind, key) / WEIGHTS
    with ctx.artifact_lock(kind, key):
        if path.exists():
            model.load_state_dict(load_file(str(path), device=str(ctx.device)))
            return model.eval(), True
        train(model)
        state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
        tmp = path.with_suffix(".tmp")
        save_file(state, str(tmp), metadata={"fields": json.dumps(fields, sort_keys=True,
                                                                     default=str)})
        tmp.replace(path)
    return model.eval(), False


def _batches(encoder: SplitClient, texts: list[str], plan: TrainPlan) -> list[tuple]:
    """Tokenized public batches with their clean embeddings e_c = G(X) (computed once)."""
    return [(ids, mask, encoder.server(encoder.embed(ids), mask))
            for ids, mask in encoder.batches(texts, plan.batch_size)]


def _noisy(mechanisms: list, encoder: SplitClient, x: torch.Tensor, mask: torch.Tensor,
           generator: torch.Generator):
    """Privatize a batch, its examples split evenly over the group's representative η levels."""
    chunks = torch.arange(x.shape[0], device=x.device).chunk(len(mechanisms))
    x_priv, noise = torch.empty_like(x), torch.empty_like(x)
    for mech, rows in zip(mechanisms, chunks):
        if len(rows) == 0:
            continue
        p = privatize_tokens(mech, x[rows], mask[rows], space=encoder.space, generator=generator)
        x_priv[rows], noise[rows] = p.x_priv, p.noise
    return x_priv, noise


def train_snd(model: SnDDenoiser, encoder: SplitClient, texts: list[str], mechanisms: list,
              plan: TrainPlan, generator: torch.Generator, say: Callable[[str], None]) -> None:
    """Minimise E||D(e_n, X̃, Z) − e_c||² over public texts with fresh noise each epoch."""
    batches = _batches(encoder, texts, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=plan.lr, weight_decay=0.01)
    model.train()
    for epoch in range(plan.epochs):
        total = torch.zeros((), device=encoder.device)
        for i in torch.randperm(len(batches), generator=generator, device=generator.device).tolist():
            ids, mask, e_clean = batches[i]
            x = encoder.embed(ids)
            x_priv, noise = _noisy(mechanisms, encoder, x, mask, generator)
            e_noisy = encoder.server(x_priv, mask)
            loss = nn.functional.mse_loss(model(e_noisy, x_priv, noise, mask), e_clean)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
        say(f"snd denoiser epoch {epoch + 1}/{plan.epochs}: mse {float(total) / len(batches):.5f}")
    model.eval()


def train_server(model: ServerTokenDenoiser, encoder: SplitClient, texts: list[str],
                 mechanisms: list, plan: TrainPlan, generator: torch.Generator,
                 say: Callable[[str], None]) -> None:
    """Server ablation: minimise the token-level MSE between S(X̃) and X on public texts."""
    opt = torch.optim.AdamW(model.parameters(), lr=plan.lr, weight_decay=0.01)
    tokenized = encoder.batches(texts, plan.batch_size)
    model.train()
    for epoch in range(plan.epochs):
        total = torch.zeros((), device=encoder.device)
        for i in torch.randperm(len(tokenized), generator=generator,
                                device=generator.device).tolist():
            ids, mask = tokenized[i]
            x = encoder.embed(ids)
            x_priv, _ = _noisy(mechanisms, encoder, x, mask, generator)
            keep = mask.bool()
            loss = nn.functional.mse_loss(model(x_priv, mask)[keep], x[keep])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
        say(f"server denoiser epoch {epoch + 1}/{plan.epochs}: "
            f"mse {float(total) / len(tokenized):.5f}")
    model.eval()


def default_config(encoder: SplitClient, d_model: int | None,
                   d_ff: int | None, n_head: int | None, n_layers: int) -> DenoiserConfig:
    """Denoiser sizes scaled to the encoder (d_model = its width, 64-d heads) unless given;
    token inputs scaled by √d / C so their coordinates are of unit size."""
    width = d_model or encoder.emb_dim
    heads = n_head or max(1, width // 64)
    return DenoiserConfig(emb_dim=encoder.emb_dim, tok_dim=encoder.tok_dim, d_model=width,
                          d_ff=d_ff or width, n_head=heads, n_layers=n_layers,
                          max_tokens=encoder.max_tokens,
                          token_scale=round(encoder.tok_dim ** 0.5 / encoder.clip_bound, 6))
