"""Canary audit of SnD's uploads (imported by :func:`dpkit.audit.canary.auditable` on first use).

The client path is SnD's own: :class:`SplitClient` embeds each canary text, the defense builds
its dχ mechanism (with the clip bound when ``clip``) and :func:`privatize_tokens` perturbs it;
what reaches ``client.server`` is recorded as the upload. Runs on the tiny encoder unless
``ctx.model`` is set.
"""

from __future__ import annotations

import torch

from dpkit.audit.canary import register_defense_audit
from dpkit.audit.canary_split import SplitCanaryAudit
from dpkit_snd.client import SplitClient
from dpkit_snd.privatize import privatize_tokens


class SndCanaryAudit(SplitCanaryAudit):
    """SnD / TokEmbPriv: canary tokens privatized by the defense's client, one text each."""

    def setup(self, ctx):
        """The split client (tiny encoder by default) and its special tokens."""
        model = ctx.model if ctx.model is not None else ctx.load_model("tiny-encoder")
        self.client = SplitClient(model, self.defense.params.max_tokens)
        return self.client.space, model.special_token_ids()

    def uploads(self, ctx, ids: torch.Tensor):
        """Privatize each canary token as a one-token text; record what the server receives."""
        client, p = self.client, self.defense.params
        mech = self.defense._mechanism(ctx, client, p.eta)
        x, mask = client.embed(ids.unsqueeze(1)), torch.ones(len(ids), 1, device=ids.device)
        ctx.ledger.spend(mech.guarantee(client.space), label=f"{self.defense.name}: canary tokens",
                         count=len(ids))
        received = []
        server = client.server

        def recording_server(x_sent, mask_sent):
            received.append(x_sent.detach().clone())
            return server(x_sent, mask_sent)

        client.server = recording_server
        private = privatize_tokens(mech, x, mask, space=client.space,
                                   generator=ctx.generator(f"{self.defense.name}-noise"))
        upload = getattr(self.defense, "upload_function", None)
        if upload is not None:
            upload(client, private)
        else:
            client.server(private.x_priv, private.mask)
        return received, p.eta


for _name in ("snd", "tokembpriv", "snd_server_denoise"):
    register_defense_audit(_name, SndCanaryAudit)
