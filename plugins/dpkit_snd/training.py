"""Training the denoisers on public text with synthetic noise (Eq. 11–12), cached as safetensors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from dpkit import TrainingCurve, Validation, fit_epochs
from dpkit_snd.client import SplitClient
from dpkit_snd.denoiser import DenoiserConfig, ServerTokenDenoiser, SnDDenoiser
from dpkit_snd.privatize import privatize_tokens

WEIGHTS = "denoiser.safetensors"


@dataclass(frozen=True)
class TrainPlan:
    """How to train one denoiser: passes over the public data (the most, with ``patience``),
    batch size, learning rate and, optionally, the patience of early stopping on the held-out
    public texts (None: train every epoch)."""

    epochs: int
    batch_size: int
    lr: float
    patience: int | None = None

    def __post_init__(self) -> None:
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"TrainPlan needs patience ≥ 1 or None, got {self.patience}")

    def key_fields(self) -> list:
        """The plan's part of the cache key: with patience the epoch cap is left out, since a
        curve that stopped before a cap is the same whatever the cap (see :meth:`reproduces`)."""
        if self.patience is None:
            return [self.epochs, self.batch_size, self.lr]
        return [self.batch_size, self.lr]

    def reproduces(self, curve: TrainingCurve) -> bool:
        """Whether training under this plan gives exactly the cached ``curve``'s model: always
        without patience (the cap is in the key); with it, when the curve stopped at or before
        this cap, or ran to a cap equal to this one (the learning rate is constant, so the
        epochs before a stop never depend on the cap)."""
        if self.patience is None:
            return True
        if not curve.steps:
            return False
        last = curve.steps[-1]
        return last == self.epochs or (bool(curve.stopped_early) and last <= self.epochs)


def cache_key(fields: dict) -> str:
    """A short stable hash of everything that determines a trained denoiser."""
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def load_or_train(ctx, kind: str, fields: dict, model: nn.Module,
                  train: Callable[[nn.Module], TrainingCurve],
                  accept: Callable[[TrainingCurve], bool] = lambda curve: True,
                  ) -> tuple[nn.Module, TrainingCurve, bool]:
    """Load ``model``'s weights from the artifact cache keyed by ``fields``, else train and save.

    The training curve is stored in the weights file's metadata, so a cached denoiser reports the
    curve it was trained with. A cached denoiser whose curve ``accept`` rejects (trained to a
    different epoch cap) is retrained and replaced. Returns the model (in eval mode), its curve
    and whether the cache was hit.
    """
    key = cache_key(fields)
    path: Path = ctx.artifact_dir(kind, key) / WEIGHTS
    with ctx.artifact_lock(kind, key):
        if path.exists():
            curve = stored_curve(path)
            if accept(curve):
                model.load_state_dict(load_file(str(path), device=str(ctx.device)))
                return model.eval(), curve, True
            ctx.say(f"cached {kind} {key} trained {curve.steps[-1] if curve.steps else 0} "
                    "epochs under another epoch cap, not what this cap trains; retraining it")
        curve = train(model)
        state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
        tmp = path.with_suffix(".tmp")
        save_file(state, str(tmp), metadata={
            "fields": json.dumps(fields, sort_keys=True, default=str),
            "curve": json.dumps(curve.to_dict())})
        tmp.replace(path)
    return model.eval(), curve, False


def stored_curve(path: Path) -> TrainingCurve:
    """The training curve saved with the denoiser weights at ``path``."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if "curve" not in metadata:
        raise ValueError(f"cached denoiser {path} has no training curve in its metadata; delete "
                         "the file (or the artifact cache) so it is retrained with one")
    return TrainingCurve.from_dict(json.loads(metadata["curve"]))


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


def _snd_loss(model: SnDDenoiser, encoder: SplitClient, batch: tuple, mechanisms: list,
              generator: torch.Generator) -> torch.Tensor:
    """MSE between the denoised and the clean embedding of one batch, on fresh noise."""
    ids, mask, e_clean = batch
    x = encoder.embed(ids)
    x_priv, noise = _noisy(mechanisms, encoder, x, mask, generator)
    e_noisy = encoder.server(x_priv, mask)
    return nn.functional.mse_loss(model(e_noisy, x_priv, noise, mask), e_clean)


def _server_loss(model: ServerTokenDenoiser, encoder: SplitClient, batch: tuple, mechanisms: list,
                 generator: torch.Generator) -> torch.Tensor:
    """Token-level MSE between S(X̃) and X over the real tokens of one batch."""
    ids, mask = batch[0], batch[1]
    x = encoder.embed(ids)
    x_priv, _ = _noisy(mechanisms, encoder, x, mask, generator)
    keep = mask.bool()
    return nn.functional.mse_loss(model(x_priv, mask)[keep], x[keep])


@torch.no_grad()
def _validation_loss(model: nn.Module, loss_fn, encoder: SplitClient, batches: list,
                     mechanisms: list, seed: int) -> float:
    """Mean loss over held-out public batches; the noise is redrawn from ``seed`` every time, so
    successive epochs are scored on the same noisy inputs."""
    if not batches:
        return float("nan")
    generator = torch.Generator(device=encoder.device).manual_seed(seed)
    model.eval()
    total = sum(float(loss_fn(model, encoder, b, mechanisms, generator)) for b in batches)
    model.train()
    return total / len(batches)


def _fit(model: nn.Module, loss_fn, name: str, encoder: SplitClient, batches: list,
         validation: list, mechanisms: list, plan: TrainPlan, generator: torch.Generator,
         val_seed: int, say: Callable[[str], None]) -> TrainingCurve:
    """AdamW over shuffled ``batches`` for ``plan.epochs``; the per-epoch curve of mean training
    loss and validation loss on ``validation`` (held-out public batches).

    With ``plan.patience``, stop once the validation loss has not improved for that many epochs,
    put back the best epoch's parameters and mark the curve (``best_step``, ``stopped_early``).
    Without it every epoch runs and the loop is exactly the unstopped one."""
    if plan.patience is not None and not validation:
        raise ValueError(f"{name}: patience={plan.patience} stops on the held-out public texts, "
                         "but none were held out; raise validation_examples or set patience to "
                         "None")
    opt = torch.optim.AdamW(model.parameters(), lr=plan.lr, weight_decay=0.01)
    curve = TrainingCurve(name)
    model.train()

    def train_epoch(_epoch: int) -> float:
        total = torch.zeros((), device=encoder.device)
        for i in torch.randperm(len(batches), generator=generator, device=generator.device).tolist():
            loss = loss_fn(model, encoder, batches[i], mechanisms, generator)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach()
        return float(total) / len(batches)

    def validate() -> Validation:
        val = _validation_loss(model, loss_fn, encoder, validation, mechanisms, val_seed)
        say(f"{name} epoch {len(curve.train_loss) + 1}/{plan.epochs}: held-out public mse "
            f"{val:.5f}")
        return Validation(loss=val)

    fit_epochs(curve, plan.epochs, train_epoch, validate, modules=(model,),
               patience=plan.patience)
    if curve.stopped_early:
        say(f"{name}: held-out public mse not improved for {plan.patience} epochs; keeping "
            f"epoch {curve.best_step}")
    model.eval()
    return curve


def train_snd(model: SnDDenoiser, encoder: SplitClient, texts: list[str], mechanisms: list,
              plan: TrainPlan, generator: torch.Generator, say: Callable[[str], None],
              validation: Sequence[str] = (), val_seed: int = 0) -> TrainingCurve:
    """Minimise E||D(e_n, X̃, Z) − e_c||² over public texts with fresh noise each epoch; returns
    the curve, validated (and, with ``plan.patience``, stopped) on the held-out public
    ``validation`` texts."""
    return _fit(model, _snd_loss, "snd denoiser", encoder, _batches(encoder, texts, plan),
                _batches(encoder, list(validation), plan), mechanisms, plan, generator,
                val_seed, say)


def train_server(model: ServerTokenDenoiser, encoder: SplitClient, texts: list[str],
                 mechanisms: list, plan: TrainPlan, generator: torch.Generator,
                 say: Callable[[str], None], validation: Sequence[str] = (),
                 val_seed: int = 0) -> TrainingCurve:
    """Server ablation: minimise the token-level MSE between S(X̃) and X on public texts; returns
    the curve, validated (and, with ``plan.patience``, stopped) on the held-out public
    ``validation`` texts."""
    return _fit(model, _server_loss, "server denoiser", encoder,
                encoder.batches(texts, plan.batch_size),
                encoder.batches(list(validation), plan.batch_size), mechanisms, plan, generator,
                val_seed, say)


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
