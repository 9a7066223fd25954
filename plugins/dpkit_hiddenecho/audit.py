"""Canary audit of HiddenEcho's uploads (imported by :func:`dpkit.audit.canary.auditable`).

The client path is HiddenEcho's own: the defense's ``laplace_dx`` mechanism with its clip bound,
:func:`privatize_split` (each token perturbed once), the defense's layout and one inference batch
of :class:`SplitProtocol` (untrained) over ``ctx.wire`` (the layer filter's up-send included),
declared as the defense declares its embeddings (η per token, reusable, masks covered). Runs on the tiny encoder unless ``ctx.model`` is set.
Training-time uploads (the gradients sent back up during fine-tuning, which the defense itself
declares uncovered) are not part of this audit.
"""

from __future__ import annotations

import torch

import dpkit
from dpkit import SplitCanaryAudit
from dpkit_hiddenecho.data import privatize_split
from dpkit_hiddenecho.protocol import SplitProtocol


class HiddenEchoCanaryAudit(SplitCanaryAudit):
    """HiddenEcho / its LDP baseline: each canary a one-token text sent for inference."""

    def setup(self, ctx):
        """The split model (tiny encoder by default) and its special tokens."""
        self.model = ctx.model if ctx.model is not None else ctx.load_model("tiny-encoder")
        return self.model.as_space(), self.model.special_token_ids()

    def send(self, ctx, ids: torch.Tensor) -> float:
        """Declare the embeddings, privatize the canary texts, run one inference batch."""
        p, model = self.defense.params, self.model
        mech = ctx.build("mechanism", "laplace_dx", {"eta": p.eta, "clip_bound": p.clip_bound})
        self.mechanism = mech  # its law is tested against the declared one
        space = model.as_space()
        ctx.wire.declare([
            dpkit.Release("embeddings", mech.guarantee(space),
                          f"{self.defense.name}: canary token embeddings, drawn once and reused",
                          count=len(ids), reusable=True),
            dpkit.Release("mask", None, "attention masks: token counts", covered_by="embeddings")])
        data = privatize_split(model, list(ids.unsqueeze(1)), [0] * len(ids), mech, space,
                               ctx.generator("hiddenecho/noise/test"))
        noisy, clean = torch.stack(data.noisy), model.embed(ids.unsqueeze(1))
        mask = torch.ones(len(ids), 1, dtype=torch.bool, device=ids.device)
        layout = self.defense.layout(model, data, ctx)
        pooling = ("last" if model.causal else "mean") if p.pooling == "auto" else p.pooling
        proto = SplitProtocol(model, layout, 2, pooling, ctx.wire,
                              ctx.generator("hiddenecho/mine", "cpu"), precision=p.precision)
        proto.train(False)
        proto.predict(noisy, clean, mask)
        return float(p.eta)

