"""Canary audit of SnD's uploads (imported by :func:`dpkit.audit.canary.auditable` on first use).

The client path is SnD's own: :class:`SplitClient` embeds each canary text, the defense builds
its dχ mechanism (with the clip bound when ``clip``), :func:`privatize_tokens` perturbs it, and
the result is sent up ``ctx.wire`` under the defense's upload release, declared with the
defense's guarantee for one token per canary (plus the covered mask), then embedded by the
server. Runs on the tiny encoder unless ``ctx.model`` is set.
"""

from __future__ import annotations

import torch

from dpkit import Release, SplitCanaryAudit
from dpkit_snd.client import SplitClient
from dpkit_snd.defenses import UPLOAD_NOISE
from dpkit_snd.privatize import privatize_tokens


class SndCanaryAudit(SplitCanaryAudit):
    """SnD / TokEmbPriv: canary tokens privatized by the defense's client, one text each."""

    def setup(self, ctx):
        """The split client (tiny encoder by default) and its special tokens."""
        if ctx.model is None:
            ctx.model, ctx.model_ref = ctx.load_model("tiny-encoder"), {"name": "tiny-encoder",
                                                                         "params": {}}
        model = ctx.model
        self.client = SplitClient(model, self.defense.params.max_tokens)
        return self.client.space, model.special_token_ids()

    def send(self, ctx, ids: torch.Tensor) -> float:
        """Declare, privatize and send each canary token as a one-token text; the server embeds."""
        client, d = self.client, self.defense
        mech = d._mechanism(ctx, client, d.params.eta)
        self.mechanism = mech  # its law is tested against the declared one
        ctx.bind_server(d)
        ctx.wire.declare([Release(d.upload, mech.guarantee(client.space),
                                  f"{d.name}: canary tokens", count=len(ids), padding=0.0)])
        x, mask = client.embed(ids.unsqueeze(1)), torch.ones(len(ids), 1, device=ids.device)
        private = privatize_tokens(mech, x, mask, space=client.space,
                                   generator=ctx.noise_generator(UPLOAD_NOISE))
        upload = getattr(d, "upload_function", None)
        if upload is not None:
            upload(ctx, client, mech, private)
        else:
            ctx.wire.send(d.upload, private.x_priv)  # the server embeds and pools
        return float(d.params.eta)

