"""The SnD defense and its baselines: TokEmbPriv, Text2Text, server-side denoise, no noise."""

from __future__ import annotations

import math
from typing import ClassVar

import torch

import dpkit
from dpkit import DefenseResult, NoGuarantee, Release, TrainingCurve, declare_releases
from dpkit_snd import denoising
from dpkit_snd.client import SplitClient
from dpkit_snd.params import (
    CommonParams,
    ServerDenoiseParams,
    SnDParams,
    Text2TextParams,
    TokEmbPrivParams,
)
from dpkit_snd.pipeline import Step, evaluate, load_split, result
from dpkit_snd.privatize import privatize_tokens
from dpkit_snd.server import PAD_ID, DenoisingServer, SplitEncoderServer

UPLOAD_NOISE = "snd-upload-noise"
"""The generator stream of the uploads' dχ noise, one for the whole family (SnD, TokEmbPriv,
server-side denoise, Text2Text): at one seed and η they perturb every token with the same draw
(common random numbers), so a paired difference between two of them measures the methods, not
two noise draws."""


def noisy_mechanism(ctx, client: SplitClient, params, who: str, eta: float):
    """The dχ mechanism of a noisy SnD-family defense at ``eta`` (clipped with ``params.clip``),
    or the noiseless :class:`dpkit.Noiseless` at η = ∞; ``ctx`` is a run context or the server's inputs."""
    raw = {"eta": eta}
    if params.clip:
        raw["clip_bound"] = client.clip_bound
    if math.isinf(eta):  # the noiseless ceiling: nothing drawn, no guarantee
        return dpkit.Noiseless(f"{who} at η = ∞ sends the token embeddings without noise",
                               raw.get("clip_bound"))
    return ctx.build("mechanism", params.mechanism, raw)


class _SplitDefense(dpkit.Component):
    """Shared flow: declare the uploads, then privatize, send, embed on the server and evaluate."""

    name: ClassVar[str]
    Params: ClassVar[type[CommonParams]]
    upload: ClassVar[str] = "embeddings"
    server: ClassVar[type[dpkit.Server]] = SplitEncoderServer

    def _setup(self, ctx):
        """Client and tokenized train/test splits for ``ctx``, built once per run."""
        return ctx.prepared(self, lambda: self._load(ctx))

    def _load(self, ctx):
        p = self.params
        client = SplitClient(ctx.model, p.max_tokens)
        train = load_split(ctx, client, p.train_split, p.train_examples, p.batch_size)
        test = load_split(ctx, client, p.test_split, p.test_examples, p.batch_size)
        return client, train, test

    def releases(self, ctx) -> list[Release]:
        """Every token of the train and test texts, each privatized once, plus the masks: a
        token is a row of the embeddings ``[B, n, d]`` or an element of the ids ``[B, n]``."""
        client, train, test = self._setup(ctx)
        embeddings = self.upload == "embeddings"
        return [Release(self.upload, self._guarantee(ctx, client),
                        f"{self.name}: token {self.upload} (train + test texts)",
                        count=train.n_tokens + test.n_tokens, unit="row" if embeddings else "element",
                        padding=0.0 if embeddings else PAD_ID)]

    def _guarantee(self, ctx, client):
        return self._mechanism(ctx, client, self.params.eta).guarantee(client.space)

    def _document_metrics(self, client, train, test) -> dict[str, float]:
        lengths = torch.cat([train.doc_lengths, test.doc_lengths]).float()
        eta = getattr(self.params, "eta", float("inf"))
        return {"tokens_per_doc": float(lengths.mean()),
                "eta_per_doc_max": eta * float(lengths.max()),
                "epsilon_doc_bound": eta * float(lengths.max()) * 2 * client.clip_bound}


class _NoisyDefense(_SplitDefense):
    """A defense whose client adds dχ noise (and optionally clips) before sending tokens."""

    def _mechanism(self, ctx, client: SplitClient, eta: float):
        return noisy_mechanism(ctx, client, self.params, self.name, eta)

    def run(self, ctx) -> DefenseResult:
        """Declare η per token, privatize, send, run the server, post-process, evaluate."""
        declare_releases(self, ctx)
        client, train, test = self._setup(ctx)
        mech = self._mechanism(ctx, client, self.params.eta)
        extra, post, curves = self._prepare(ctx, client)
        gen = ctx.noise_generator(UPLOAD_NOISE)

        @torch.no_grad()
        def method(ids, mask, x, upload):
            p = privatize_tokens(mech, x, mask, space=client.space, generator=gen)
            return post(p, upload(p.x_priv))

        metrics, truth, classifier = evaluate(ctx, client, self.params, train, test, method)
        metrics.update(extra, clip_bound=client.clip_bound if self.params.clip else float("inf"),
                       **self._document_metrics(client, train, test))
        return result(metrics, truth, ctx.wire.summary(), [classifier, *curves])

    def _prepare(self, ctx, client):
        """Train/load what the method needs; returns (extra metrics, post-processing of the
        server's pooled answer, curves)."""
        def post(p, e):
            return Step(p.x_priv, e, e, p.noise)
        return {}, post, []


class TokEmbPriv(_NoisyDefense):
    """TokEmbPriv (Qu et al. 2021): dχ noise on token embeddings, no denoising."""

    name: ClassVar[str] = "tokembpriv"
    Params: ClassVar[type[TokEmbPrivParams]] = TokEmbPrivParams


class SnD(_NoisyDefense):
    """Split-N-Denoise: dχ noise + clip, server encoder, client denoiser trained on public text."""

    name: ClassVar[str] = "snd"
    Params: ClassVar[type[SnDParams]] = SnDParams

    def _prepare(self, ctx, client):
        model, info, curve = denoising.snd_denoiser(ctx, client, self.params, self._mechanism)

        def post(p, e_n):
            return Step(p.x_priv, e_n, model(e_n, p.x_priv, p.noise, p.mask), p.noise)
        return info, post, [curve]


class ServerDenoise(_NoisyDefense):
    """Ablation (App. A.12): the server denoises X̃ without the noise, then runs the encoder."""

    name: ClassVar[str] = "snd_server_denoise"
    Params: ClassVar[type[ServerDenoiseParams]] = ServerDenoiseParams
    server: ClassVar[type[dpkit.Server]] = DenoisingServer

    def _prepare(self, ctx, client):
        report = ctx.wire.send("denoiser_report")  # the server trained (or loaded) its denoiser
        curve = TrainingCurve.from_dict(report["curve"])

        def post(p, e):
            return Step(p.x_priv, e, e, p.noise)
        return dict(report["info"]), post, [curve]


class SnDText2Text(_SplitDefense):
    """Text2Text (Feyisetan et al. 2020): noise, nearest token, server embeds the new tokens."""

    name: ClassVar[str] = "snd_text2text"
    Params: ClassVar[type[Text2TextParams]] = Text2TextParams
    upload: ClassVar[str] = "substituted_ids"

    def _mechanism(self, ctx, client, eta):
        return ctx.build("mechanism", self.params.mechanism, {"eta": eta})

    def run(self, ctx) -> DefenseResult:
        """Declare η per token, substitute tokens, send the ids, embed them on the server, evaluate."""
        declare_releases(self, ctx)
        client, train, test = self._setup(ctx)
        mech = self._mechanism(ctx, client, self.params.eta)
        gen = ctx.noise_generator(UPLOAD_NOISE)

        @torch.no_grad()
        def method(ids, mask, x, upload):
            keep = mask.bool()
            new_ids = torch.full_like(ids, PAD_ID)
            new_ids[keep] = mech.privatize(ids[keep], space=client.space, generator=gen)
            e = upload(new_ids)  # the server embeds the ids it received and pools
            return Step(client.embed(new_ids.clamp_min(0)), e, e, None)

        metrics, truth, classifier = evaluate(ctx, client, self.params, train, test, method,
                                             mi=False)
        metrics.update(self._document_metrics(client, train, test))
        return result(metrics, truth, ctx.wire.summary(), [classifier])


class SnDClean(_SplitDefense):
    """No noise: the server sees the clean token embeddings (upper bound of utility, ε = ∞)."""

    name: ClassVar[str] = "snd_clean"
    Params: ClassVar[type[CommonParams]] = CommonParams
    REASON: ClassVar[str] = "snd_clean sends the clean token embeddings: no noise, no guarantee"

    def _guarantee(self, ctx, client):
        return NoGuarantee(self.REASON)

    def run(self, ctx) -> DefenseResult:
        """Record ε = ∞ on the ledger, send clean tokens, evaluate."""
        declare_releases(self, ctx)
        client, train, test = self._setup(ctx)

        def method(ids, mask, x, upload):
            e = upload(x)
            return Step(x, e, e, None)

        metrics, truth, classifier = evaluate(ctx, client, self.params, train, test, method,
                                             mi=False)
        metrics.update(self._document_metrics(client, train, test))
        return result(metrics, truth, ctx.wire.summary(), [classifier])

