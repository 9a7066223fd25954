"""Getting a trained denoiser for a cell: pick the η group, then load it from cache or train it."""

from __future__ import annotations

import time

import torch

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


def _public_texts(ctx, params) -> tuple[list[str], str]:
    """The public training texts and the dataset fingerprint (part of the cache key)."""
    ref = params.denoiser.public
    data = ctx.load_dataset(ref.name, ref.params)
    texts = [t for t in data[params.denoiser.public_split].texts if t.strip()]
    if len(texts) < 2:
        raise ValueError(f"public dataset {ref.name!r} split {params.denoiser.public_split!r} has "
                         f"{len(texts)} non-empty texts; the denoiser needs at least 2")
    return texts[:params.denoiser.public_examples], getattr(data, "fingerprint", ref.name)


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
    plan = TrainPlan(epochs=d.epochs, batch_size=d.batch_size, lr=d.lr)
    texts, fingerprint = _public_texts(ctx, params)
    fields = {"kind": kind, "config": cfg.to_dict(), "encoder": client.key, "etas": etas,
              "mechanism": params.mechanism, "clip": client.clip_bound if params.clip else None,
              "public": [d.public.name, d.public.params, d.public_split, len(texts), fingerprint],
              "plan": [plan.epochs, plan.batch_size, plan.lr], "seed": ctx.seed}
    return group, mechanisms, cfg, plan, texts, fields


def snd_denoiser(ctx, client: SplitClient, params, make_mechanism):
    """SnD's client denoiser for ``params.eta``'s group; returns (model, info metrics)."""
    group, mechs, cfg, plan, texts, fields = _setup(ctx, client, params, make_mechanism, "snd")
    gen = ctx.generator(f"snd-denoiser-train-{group}")
    start = time.perf_counter()

    def train(model):
        ctx.say(f"training SnD denoiser for η group {params.eta_groups[group]} on "
                f"{len(texts)} public texts")
        train_snd(model, client, texts, mechs, plan, gen, ctx.say)

    model = _seeded(ctx, f"snd-denoiser-init-{group}", lambda: SnDDenoiser(cfg))
    model, hit = load_or_train(ctx, "snd_denoiser", fields, model, train)
    return model, _info(group, hit, start)


def server_denoiser(ctx, client: SplitClient, params, make_mechanism):
    """The server-side token denoiser of the ablation; returns (model, info metrics)."""
    group, mechs, cfg, plan, texts, fields = _setup(ctx, client, params, make_mechanism, "server")
    gen = ctx.generator(f"snd-server-denoiser-train-{group}")
    start = time.perf_counter()

    def train(model):
        ctx.say(f"training server-side denoiser for η group {params.eta_groups[group]}")
        train_server(model, client, texts, mechs, plan, gen, ctx.say)

    model = _seeded(ctx, f"snd-server-denoiser-init-{group}", lambda: ServerTokenDenoiser(cfg))
    model, hit = load_or_train(ctx, "snd_server_denoiser", fields, model, train)
    return model, _info(group, hit, start)


def _info(group: int, hit: bool, start: float) -> dict[str, float]:
    return {"denoiser_group": float(group), "denoiser_cached": float(hit),
            "denoiser_seconds": time.perf_counter() - start}
