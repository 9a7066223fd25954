"""DP-SGD baseline: a torch skip-gram (negative sampling) trained with DP-SGD, one document per sample,
and its non-private twin (the same recipe without clipping or noise).

Batches are Poisson-sampled with rate q, matching the ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``
that the ledger composes ``steps`` times. The trainer is :mod:`dpkit_dped.sgd`.
"""

from __future__ import annotations

import math

import dp_accounting
import torch

import dpkit
from dpkit import DpGuarantee, NoGuarantee, Release, calibrate_noise, declare_releases, dpsgd_event
from dpkit_dped.corpus import document_tensor, encode
from dpkit_dped.defenses import privacy_settings, with_curves
from dpkit_dped.pipeline import evaluate, prepare, public_model
from dpkit_dped.releases import GRADIENT, as_release, gradient_sender, request_trained
from dpkit_dped.sgd import (
    SkipGramNS,
    opacus_clipped_sum,
    sparse_clipped_sum,
    train_dpsgd,
    train_dpsgd_documents,
)
from dpkit_dped.params import DpsgdParams, SgdParams
from dpkit_dped.sgd_server import INIT_STREAM, GradientServer, random_start

__all__ = ["DpedDpsgd", "DpedNonPrivateSgd", "DpedPublicSgd", "SkipGramNS", "opacus_clipped_sum",
           "sparse_clipped_sum", "train_dpsgd", "train_dpsgd_documents"]


def gradient_releases(spends: list, covers: int | None = None) -> list[Release]:
    """The one ``noisy_gradient`` release of a DP-SGD plan's single spend (unit: send)."""
    (spend,) = spends
    return [as_release(GRADIENT, spend, unit="send", covers=covers)]


def train_on_private(ctx, p, steps: int, noise_multiplier: float, max_grad_norm: float,
                     clipping: str = "sparse", public: bool = False):
    """(setup, trained model, public start or None): ``p``'s recipe on the private training split.

    Each step's noisy gradient crosses ``ctx.wire`` as one ``noisy_gradient`` send (declared by
    the caller); the model returned is the one the server trained from them
    (:mod:`dpkit_dped.sgd_server`), with the client's training curve. ``public``: the same
    recipe on the public corpus's documents instead (DP-SGD's own floor), at the sampling rate
    that gives the private run's expected batch size, so that the noise added to the averaged
    gradient has the private run's scale.
    """
    setup = prepare(ctx, p)
    texts, rate = setup.private_texts, p.sampling_rate
    if public:
        texts = setup.public_texts
        rate = min(1.0, p.sampling_rate * len(setup.private_texts) / len(texts))
    tokens, lengths = document_tensor(encode(texts, setup.vocab), p.max_doc_len)
    counts = torch.tensor(setup.vocab.counts, dtype=torch.float32, device=ctx.device) ** 0.75
    start = public_model(ctx, setup, p) if p.init == "public" else None
    init = start if start is not None else random_start(len(setup.vocab), p.dim,
                                                        ctx.server_numpy_seed(INIT_STREAM))
    mirror = train_dpsgd_documents(
        tokens.to(ctx.device), lengths.to(ctx.device), counts / counts.sum(),
        pairs_per_doc=p.pairs_per_doc, window=p.window, dim=p.dim, negatives=p.negative,
        noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
        sampling_rate=rate, steps=steps, lr=p.lr, generator=ctx.noise_generator("dped-dpsgd"),
        clipping=clipping, optimizer=p.optimizer, momentum=p.momentum, init=init,
        validation=tuple(x.to(ctx.device) for x in setup.validation),
        release=gradient_sender(ctx.wire))
    return setup, request_trained(ctx.wire, mirror.curve), start


class DpedDpsgd(dpkit.Component):
    """DP-SGD baseline: skip-gram trained with per-document clipping and Gaussian noise."""

    name = "dped_dpsgd"
    Params = DpsgdParams
    server = GradientServer

    def noise_multiplier(self, delta: float, accountant: str) -> float:
        """z such that ``steps`` Poisson-sampled steps spend at most the target ε (calibrated once
        per (δ, accountant))."""
        p, known = self.params, self.__dict__.setdefault("_calibrated", {})
        if (delta, accountant) not in known:
            known[delta, accountant] = calibrate_noise(
                lambda z: dpsgd_event(z, p.sampling_rate, p.step_count()), p.target_epsilon,
                delta, accountant)
        return known[delta, accountant]

    def spends_for(self, z: float) -> list:
        """Ledger entries for noise multiplier ``z``: one grouped entry, count = steps."""
        p = self.params
        label = f"DP-SGD step, one document per sample (C={p.max_grad_norm})"
        return [(DpGuarantee(dpsgd_event(z, p.sampling_rate, 1)), label, p.step_count())]

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.spends_for(self.noise_multiplier(privacy.delta, privacy.accountant))

    def releases(self, ctx) -> list[Release]:
        """One noisy gradient per step crosses the wire (unit: send, count: steps)."""
        return gradient_releases(self.spends_for(self.noise_multiplier(*privacy_settings(ctx))))

    def run(self, ctx):
        """Calibrate, declare, train with per-document clipping and noise (each step's gradient
        sent over the wire), evaluate."""
        declare_releases(self, ctx)
        p = self.params
        z = self.noise_multiplier(*privacy_settings(ctx))
        steps = p.step_count()
        ctx.say(f"dped_dpsgd: {steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}")
        setup, model, start = train_on_private(ctx, p, steps, z, p.max_grad_norm, p.clipping)
        metrics = evaluate(ctx, setup, model, p)
        metrics.update(target_epsilon=p.target_epsilon, noise_multiplier=z, steps=float(steps))
        return with_curves(metrics, [model] + ([start] if start is not None else []))


class DpedNonPrivateSgd(dpkit.Component):
    """Non-private ceiling of the SGD recipe: DP-SGD's training without clipping or noise (ε = ∞)."""

    name = "dped_nonprivate_sgd"
    Params = SgdParams
    server = GradientServer

    def planned_spends(self, privacy) -> list:
        """One NoGuarantee entry."""
        reason = "non-private baseline: the DP-SGD recipe on the private corpus without noise"
        return [(NoGuarantee(reason), "non-private SGD skip-gram", 1)]

    def releases(self, ctx) -> list[Release]:
        """Each step's gradient crosses the wire under the one ε = ∞ entry."""
        return gradient_releases(self.planned_spends(None))

    def run(self, ctx):
        """Train (no clipping, no noise) and evaluate."""
        declare_releases(self, ctx)
        p = self.params
        ctx.say(f"dped_nonprivate_sgd: {p.steps} SGD steps, q={p.sampling_rate}")
        setup, model, start = train_on_private(ctx, p, p.steps, 0.0, math.inf)
        metrics = evaluate(ctx, setup, model, p)
        metrics.update(steps=float(p.steps))
        return with_curves(metrics, [model] + ([start] if start is not None else []))


class DpedPublicSgd(DpedDpsgd):
    """DP-SGD's own floor: its recipe (start, q, steps, z and clipping of the target ε) on the public
    corpus. It trains on no private text, so the ledger records ε = 0; only the *number* of private
    training documents is read, to match the private run's expected batch size (as the DP-SGD
    row itself treats it: public)."""

    name = "dped_public_sgd"

    def planned_spends(self, privacy) -> list:
        """One no-op entry: the recipe sees only public documents."""
        return [(DpGuarantee(dp_accounting.NoOpDpEvent()),
                 "DP-SGD recipe on the public corpus (no private data)", 1)]

    def releases(self, ctx) -> list[Release]:
        """Each step's gradient (of public documents) crosses under the one ε = 0 entry."""
        return gradient_releases(self.planned_spends(None), covers=self.params.step_count())

    def run(self, ctx):
        """The private run's z and steps, trained on public documents, evaluated on private test."""
        declare_releases(self, ctx)
        p = self.params
        z = self.noise_multiplier(*privacy_settings(ctx))
        steps = p.step_count()
        ctx.say(f"dped_public_sgd: {steps} steps on public documents, z={z:.3f}")
        setup, model, start = train_on_private(ctx, p, steps, z, p.max_grad_norm, p.clipping,
                                               public=True)
        metrics = evaluate(ctx, setup, model, p)
        metrics.update(target_epsilon=p.target_epsilon, noise_multiplier=z, steps=float(steps))
        return with_curves(metrics, [model] + ([start] if start is not None else []))
