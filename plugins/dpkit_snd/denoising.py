"""Getting a trained denoiser for a cell: pick the η group, then load it from cache or train it."""

from __future__ import annotations

import time

import torch

from dpkit import TrainingCurve
from dpkit_snd.client import SplitClient
from dpkit_snd.denoiser import ServerTokenDenoiser, SnDDenoiser
from dpkit_snd.privatize import choose_group
from dpkit_snd.training import (
    TrainPlan,
    default_config,
    load_or_train,
    train_server,
    train_snd,
)

CURVE_FORMAT = 1  # bump when what a cached denoiser's training curve records changes


def _public_texts(ctx, params) -> tuple[list[str], list[str], str]:
    """The public training texts, the held-out public validation texts (the split's last
    ``validation_examples``, at most a fifth of it) and the dataset fingerprint (cache key)."""
    d = params.denoiser
    data = ctx.load_dataset(d.public.name, d.public.params)
    texts = [t for t in data[d.public_split].texts if t.strip()]
    if len(texts) < 3:
        raise ValueError(f"public dataset {d.public.name!r} split {d.public_split!r} has "
                         f"{len(texts)} non-empty texts; the denoiser needs at least 3 (2 to "
                         "train on, 1 held out for validation)")
    n_val = max(1, min(d.validation_examples, len(texts) // 5))
    n_train = min(d.public_examples, len(texts) - n_val)
    return (texts[:n_train], texts[len(texts) - n_val:],
            getattr(data, "fingerprint", d.public.name))


def _seeded(ctx, stream: str, build):
    """Build a module with weights initialised from the cell seed (reproducible runs)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.numpy_seed(stream))
        module = build()
    return module.to(ctx.device)


def _setup(ctx, client: SplitClient, params, make_mechanism, kind: str):
    """Group, its training mechanisms, config, plan and the cache-key fields."""
    group = choose_group(params.eta, params.eta_groups)
    etas = sorted(params.eta_groups[group])
    mechanisms = [make_mechanism(ctx, client, eta) for eta in etas]
    d = params.denoiser
    cfg = default_config(client, d.d_model, d.d_ff, d.n_head, d.n_layers)
    plan = TrainPlan(epochs=d.epochs, batch_size=d.batch_size, lr=d.lr, patience=d.patience)
    texts, validation, fingerprint = _public_texts(ctx, params)
    fields = {"kind": kind, "config": cfg.to_dict(), "encoder": client.key, "etas": etas,
              "mechanism": params.mechanism, "clip": client.clip_bound if params.clip else None,
              "public": [d.public.name, d.public.params, d.public_split, len(texts), fingerprint],
              "validation": len(validation), "curve_format": CURVE_FORMAT,
              "plan": plan.key_fields(), "seed": ctx.seed}
    if plan.patience is not None:  # only when set: denoisers cached without stopping keep their key
        fields["patience"] = plan.patience
    return group, mechanisms, cfg, plan, (texts, validation), fields


def snd_denoiser(ctx, client: SplitClient, params, make_mechanism):
    """SnD's client denoiser for ``params.eta``'s group; returns (model, info metrics, curve)."""
    group, mechs, cfg, plan, (texts, val), fields = _setup(ctx, client, params, make_mechanism,
                                                           "snd")
    gen = ctx.generator(f"snd-denoiser-train-{group}")
    start = time.perf_counter()

    def train(model):
        ctx.say(f"training SnD denoiser for η group {params.eta_groups[group]} on "
                f"{len(texts)} public texts ({len(val)} held out)")
        return train_snd(model, client, texts, mechs, plan, gen, ctx.say, val,
                         ctx.numpy_seed(f"snd-denoiser-val-{group}"))

    model = _seeded(ctx, f"snd-denoiser-init-{group}", lambda: SnDDenoiser(cfg))
    model, curve, hit = load_or_train(ctx, "snd_denoiser", fields, model, train, plan.reproduces)
    return model, _info(group, hit, start, texts, val, curve), curve


def server_denoiser(ctx, client: SplitClient, params, make_mechanism):
    """The server-side token denoiser of the ablation; returns (model, info metrics, curve)."""
    group, mechs, cfg, plan, (texts, val), fields = _setup(ctx, client, params, make_mechanism,
                                                           "server")
    gen = ctx.generator(f"snd-server-denoiser-train-{group}")
    start = time.perf_counter()

    def train(model):
        ctx.say(f"training server-side denoiser for η group {params.eta_groups[group]}")
        return train_server(model, client, texts, mechs, plan, gen, ctx.say, val,
                            ctx.numpy_seed(f"snd-server-denoiser-val-{group}"))

    model = _seeded(ctx, f"snd-server-denoiser-init-{group}", lambda: ServerTokenDenoiser(cfg))
    model, curve, hit = load_or_train(ctx, "snd_server_denoiser", fields, model, train,
                                      plan.reproduces)
    return model, _info(group, hit, start, texts, val, curve), curve


def _info(group: int, hit: bool, start: float, texts: list[str], validation: list[str],
          curve: TrainingCurve) -> dict[str, float]:
    """What the cell reports about its denoiser; with early stopping also the epochs it trained
    (``denoiser_epochs_trained``), the one it kept and whether it stopped early."""
    info = {"denoiser_group": float(group), "denoiser_cached": float(hit),
            "denoiser_seconds": time.perf_counter() - start,
            "denoiser_train_texts": float(len(texts)),
            "denoiser_val_texts": float(len(validation))}
    if curve.stopped_early is not None and curve.steps:
        info.update(denoiser_epochs_trained=float(curve.steps[-1]),
                    denoiser_best_epoch=float(curve.best_step if curve.best_step is not None
                                              else -1),
                    denoiser_stopped_early=float(curve.stopped_early))
    return info
