"""Canary audit of HiddenEcho's uploads (imported by :func:`dpkit.audit.canary.auditable`).

The client path is HiddenEcho's own: the defense's ``laplace_dx`` mechanism with its clip bound,
:func:`privatize_split` (each token perturbed once, from the release-noise stream), the
defense's layout (the layer filter's samples sent to the server, which picks the layers) and one
inference batch of :class:`SplitClient` over ``ctx.wire`` to the defense's own server, declared
as the defense declares its embeddings (η per token, reusable, padding rows zero). Runs on the
tiny encoder unless ``ctx.model`` is set; the server loads the same model by name. Training-time
uploads (the gradients sent up during fine-tuning, which the defense itself declares uncovered)
are not part of this audit.
"""

from __future__ import annotations

import torch

import dpkit
from dpkit import SplitCanaryAudit
from dpkit_hiddenecho.client import SplitClient
from dpkit_hiddenecho.data import privatize_split
from dpkit_hiddenecho.layout import layout_for, needs_filter

DEFAULT_MODEL = {"name": "tiny-encoder", "params": {}}


class HiddenEchoCanaryAudit(SplitCanaryAudit):
    """HiddenEcho / its LDP baseline: each canary a one-token text sent for inference."""

    def setup(self, ctx):
        """The split model (tiny encoder by default, also the server's) and its special tokens."""
        if ctx.model is None:
            ctx.model = ctx.load_model(DEFAULT_MODEL["name"], DEFAULT_MODEL["params"])
            ctx.model_ref = dict(DEFAULT_MODEL)
        self.model = ctx.model
        return self.model.as_space(), self.model.special_token_ids()

    def send(self, ctx, ids: torch.Tensor) -> float:
        """Declare the embeddings, privatize the canary texts, run one inference batch."""
        defense, model = self.defense, self.model
        p = defense.params
        mech = ctx.build("mechanism", "laplace_dx", {"eta": p.eta, "clip_bound": p.clip_bound})
        self.mechanism = mech  # its law is tested against the declared one
        space = model.as_space()
        ctx.bind_server(defense)
        ctx.wire.declare([
            dpkit.Release("embeddings", mech.guarantee(space),
                          f"{defense.name}: canary token embeddings, drawn once and reused",
                          count=len(ids), reusable=True, padding=0.0)])
        data = privatize_split(model, list(ids.unsqueeze(1)), [0] * len(ids), mech, space,
                               ctx.noise_generator("hiddenecho/noise/test"))
        noisy, clean = torch.stack(data.noisy), model.embed(ids.unsqueeze(1))
        mask = torch.ones(len(ids), 1, dtype=torch.bool, device=ids.device)
        filtered = defense.filter_layers(model, data, ctx) if needs_filter(p) else None
        layout = layout_for(p, model.num_layers, model.hidden_size, filtered)
        pooling = ("last" if model.causal else "mean") if p.pooling == "auto" else p.pooling
        client = SplitClient(model, layout, 2, pooling, ctx.wire,
                             ctx.generator("hiddenecho/mine", "cpu"))
        client.train(False)
        ctx.wire.phase = "eval"
        client.predict(noisy, clean, mask)
        return float(p.eta)


AUDITS = {name: HiddenEchoCanaryAudit for name in ("hiddenecho", "hiddenecho_ldp", "hiddenecho_full")}
"""Canary-audit adapter per defense name (registered by the plug-in's hook)."""
