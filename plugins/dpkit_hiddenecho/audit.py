"""Canary audit of HiddenEcho's uploads (imported by :func:`dpkit.audit.canary.auditable`).

The client path is HiddenEcho's own: the defense's ``laplace_dx`` mechanism with its clip bound,
:func:`privatize_split` (each token perturbed once), the defense's layout and one inference batch
of :class:`SplitProtocol` (untrained), whose ``up`` wire transfers are recorded as the upload.
Runs on the tiny encoder unless ``ctx.model`` is set. Training-time uploads (the gradients sent
back up during fine-tuning) are not covered.
"""

from __future__ import annotations

import torch

from dpkit.audit.canary import register_defense_audit
from dpkit.audit.canary_split import SplitCanaryAudit
from dpkit_hiddenecho.data import privatize_split
from dpkit_hiddenecho.protocol import SplitProtocol
from dpkit_hiddenecho.wire import UP, WireMeter


class HiddenEchoCanaryAudit(SplitCanaryAudit):
    """HiddenEcho / its LDP baseline: each canary a one-token text sent up the wire."""

    def setup(self, ctx):
        """The split model (tiny encoder by default) and its special tokens."""
        self.model = ctx.model if ctx.model is not None else ctx.load_model("tiny-encoder")
        return self.model.as_space(), self.model.special_token_ids()

    def uploads(self, ctx, ids: torch.Tensor):
        """Privatize the canary texts and send them up a metered wire; return what went up."""
        p = self.defense.params
        mech = ctx.build("mechanism", "laplace_dx", {"eta": p.eta, "clip_bound": p.clip_bound})
        space = self.model.as_space()
        ctx.ledger.spend(mech.guarantee(space), label=f"{self.defense.name}: canary tokens",
                         count=len(ids))
        data = privatize_split(self.model, list(ids.unsqueeze(1)), [0] * len(ids), mech, space,
                               ctx.generator("hiddenecho/noise/test"))
        sent: list[torch.Tensor] = []
        wire = WireMeter(phase="eval")
        transfer = wire.transfer

        def recording_transfer(tensor, direction, kind, requires_grad=False):
            if direction == UP and tensor.is_floating_point():
                sent.append(tensor.detach().clone())
            return transfer(tensor, direction, kind, requires_grad)

        wire.transfer = recording_transfer
        noisy = torch.stack(data.noisy)
        upload = getattr(self.defense, "upload_function", None)
        if upload is not None:
            upload(wire, noisy, self.model.embed(ids.unsqueeze(1)))
            return sent, p.eta
        layout = self.defense.layout(self.model, data, ctx)
        pooling = ("last" if self.model.causal else "mean") if p.pooling == "auto" else p.pooling
        proto = SplitProtocol(self.model, layout, 2, pooling, wire,
                              ctx.generator("hiddenecho/mine", "cpu"))
        proto.train(False)
        mask = torch.ones(len(ids), 1, dtype=torch.bool, device=ids.device)
        proto.predict(noisy, self.model.embed(ids.unsqueeze(1)), mask)
        return sent, p.eta


for _name in ("hiddenecho", "hiddenecho_ldp", "hiddenecho_full"):
    register_defense_audit(_name, HiddenEchoCanaryAudit)
