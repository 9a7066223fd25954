"""The SnD defense and its baselines: TokEmbPriv, Text2Text, server-side denoise, no noise."""

from __future__ import annotations

from typing import ClassVar

import torch

from dpkit import DefenseResult
from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit_snd import denoising
from dpkit_snd.client import SplitClient
from dpkit_snd.params import (CommonParams, ServerDenoiseParams, SnDParams, Text2TextParams,
                              TokEmbPrivParams)
from dpkit_snd.pipeline import Step, evaluate, load_split, result, wire_bytes
from dpkit_snd.privatize import privatize_tokens

FLOAT_BYTES = 4


class _SplitDefense:
    """Shared flow: load data, spend on the ledger, then privatize, embed and evaluate."""

    name: ClassVar[str]
    Params: ClassVar[type[CommonParams]]

    def __init__(self, params):
        self.params = params

    def _setup(self, ctx):
        p = self.params
        client = SplitClient(ctx.model, p.max_tokens)
        train = load_split(ctx, client, p.train_split, p.train_examples, p.batch_size)
        test = load_split(ctx, client, p.test_split, p.test_examples, p.batch_size)
        return client, train, test

    def _spend(self, ctx, guarantee, train, test) -> None:
        """One release: every token of the train and test texts, each privatized once."""
        ctx.ledger.spend(guarantee, label=f"{self.name}: token embeddings (train + test texts)",
                         count=max(1, train.n_tokens + test.n_tokens))

    def _document_metrics(self, client, train, test) -> dict[str, float]:
        lengths = torch.cat([train.doc_lengths, test.doc_lengths]).float()
        eta = getattr(self.params, "eta", float("inf"))
        return {"tokens_per_doc": float(lengths.mean()),
                "eta_per_doc_max": eta * float(lengths.max()),
                "epsilon_doc_bound": eta * float(lengths.max()) * 2 * client.clip_bound}

    def planned_spends(self, privacy) -> list[tuple]:
        """Per-token η spends, counted at the upper bound of max_tokens per text."""
        p = self.params
        return [(self._planned_guarantee(),
                 f"{self.name}: token embeddings (≤ max_tokens per text, train + test)",
                 (p.train_examples + p.test_examples) * p.max_tokens)]

    def _planned_guarantee(self):
        return MetricDpGuarantee(self.params.eta, "l2", "", "token")


class _NoisyDefense(_SplitDefense):
    """A defense whose client adds dχ noise (and optionally clips) before sending tokens."""

    def _mechanism(self, ctx, client: SplitClient, eta: float):
        raw = {"eta": eta}
        if self.params.clip:
            raw["clip_bound"] = client.clip_bound
        return ctx.build("mechanism", self.params.mechanism, raw)

    def run(self, ctx) -> DefenseResult:
        """Spend η per token, privatize, run the server, post-process, evaluate."""
        client, train, test = self._setup(ctx)
        mech = self._mechanism(ctx, client, self.params.eta)
        self._spend(ctx, mech.guarantee(client.space), train, test)
        extra, post = self._prepare(ctx, client)
        gen = ctx.generator(f"{self.name}-noise")

        @torch.no_grad()
        def method(ids, mask, x):
            p = privatize_tokens(mech, x, mask, space=client.space, generator=gen)
            return post(p, client)

        metrics, view = evaluate(ctx, client, self.params, train, test, method)
        metrics.update(extra, clip_bound=client.clip_bound if self.params.clip else float("inf"),
                       **self._document_metrics(client, train, test))
        return result(metrics, view, wire_bytes(client, train, test, client.tok_dim * FLOAT_BYTES))

    def _prepare(self, ctx, client):
        """Train/load what the method needs; returns (extra metrics, post-processing)."""
        def post(p, client):
            e = client.server(p.x_priv, p.mask)
            return Step(p.x_priv, e, e, p.noise)
        return {}, post


class TokEmbPriv(_NoisyDefense):
    """TokEmbPriv (Qu et al. 2021): dχ noise on token embeddings, no denoising."""

    name: ClassVar[str] = "tokembpriv"
    Params: ClassVar[type[TokEmbPrivParams]] = TokEmbPrivParams


class SnD(_NoisyDefense):
    """Split-N-Denoise: dχ noise + clip, server encoder, client denoiser trained on public text."""

    name: ClassVar[str] = "snd"
    Params: ClassVar[type[SnDParams]] = SnDParams

    def _prepare(self, ctx, client):
        model, info = denoising.snd_denoiser(ctx, client, self.params, self._mechanism)

        def post(p, client):
            e_n = client.server(p.x_priv, p.mask)
            return Step(p.x_priv, e_n, model(e_n, p.x_priv, p.noise, p.mask), p.noise)
        return info, post


class ServerDenoise(_NoisyDefense):
    """Ablation (App. A.12): the server denoises X̃ without the noise, then runs the encoder."""

    name: ClassVar[str] = "snd_server_denoise"
    Params: ClassVar[type[ServerDenoiseParams]] = ServerDenoiseParams

    def _prepare(self, ctx, client):
        model, info = denoising.server_denoiser(ctx, client, self.params, self._mechanism)

        def post(p, client):
            e = client.server(model(p.x_priv, p.mask), p.mask)
            return Step(p.x_priv, e, e, p.noise)
        return info, post


class SnDText2Text(_SplitDefense):
    """Text2Text (Feyisetan et al. 2020): noise, nearest token, server embeds the new tokens."""

    name: ClassVar[str] = "snd_text2text"
    Params: ClassVar[type[Text2TextParams]] = Text2TextParams

    def run(self, ctx) -> DefenseResult:
        """Spend η per token, substitute tokens, embed them on the server, evaluate."""
        client, train, test = self._setup(ctx)
        mech = ctx.build("mechanism", self.params.mechanism, {"eta": self.params.eta})
        self._spend(ctx, mech.guarantee(client.space), train, test)
        gen = ctx.generator(f"{self.name}-noise")

        @torch.no_grad()
        def method(ids, mask, x):
            keep = mask.bool()
            new_ids = ids.clone()
            new_ids[keep] = mech.privatize(ids[keep], space=client.space, generator=gen)
            sent = client.embed(new_ids)
            e = client.server(sent, mask)
            return Step(sent, e, e, None)

        metrics, view = evaluate(ctx, client, self.params, train, test, method, mi=False)
        metrics.update(self._document_metrics(client, train, test))
        return result(metrics, view, wire_bytes(client, train, test, FLOAT_BYTES))


class SnDClean(_SplitDefense):
    """No noise: the server sees the clean token embeddings (upper bound of utility, ε = ∞)."""

    name: ClassVar[str] = "snd_clean"
    Params: ClassVar[type[CommonParams]] = CommonParams
    REASON: ClassVar[str] = "snd_clean sends the clean token embeddings: no noise, no guarantee"

    def run(self, ctx) -> DefenseResult:
        """Record ε = ∞ on the ledger, embed clean tokens, evaluate."""
        client, train, test = self._setup(ctx)
        self._spend(ctx, NoGuarantee(self.REASON), train, test)

        def method(ids, mask, x):
            e = client.server(x, mask)
            return Step(x, e, e, None)

        metrics, view = evaluate(ctx, client, self.params, train, test, method, mi=False)
        metrics.update(self._document_metrics(client, train, test))
        return result(metrics, view, wire_bytes(client, train, test, client.tok_dim * FLOAT_BYTES))

    def _planned_guarantee(self):
        return NoGuarantee(self.REASON)


DEFENSES: tuple[type, ...] = (SnD, TokEmbPriv, SnDText2Text, ServerDenoise, SnDClean)
