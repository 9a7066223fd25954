"""Canary audits of the DPED family (imported by :func:`dpkit.audit.canary.auditable` on first use).

``dped_dpsgd``: the defense's own calibration, ledger spends and :func:`train_dpsgd` on a small
synthetic corpus; each canary is one document of a (center, context) pair of two tokens no other
document uses, scored by the trained model's logit for that pair.

``dped`` / ``dped_pate``: the defense's own noise plan, ledger spends and :func:`aggregate` on
synthetic teacher votes (and vectors); each canary is one query whose vote one teacher changes —
the worst case the accounting covers — scored from the released aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from dpkit.audit.canary import CanaryRun, register_defense_audit
from dpkit_dped.aggregation import aggregate
from dpkit_dped.defenses import privacy_settings, record
from dpkit_dped.dpsgd import train_dpsgd

BACKGROUND_TOKENS = 64
BACKGROUND_DOCS = 1000


@dataclass
class DpsgdCanaryAudit:
    """One DP-SGD run of ``defense`` with canary documents; ``train`` is the defense's trainer."""

    defense: Any
    train: Callable[..., Any] = train_dpsgd

    def audit_run(self, ctx, included: np.ndarray) -> CanaryRun:
        """Calibrate z, record the spends, train on background + included canaries, score all."""
        p, m = self.defense.params, len(included)
        delta, accountant = privacy_settings(ctx)
        z = self.defense.noise_multiplier(delta, accountant)
        record(ctx, self.defense.spends_for(z))
        gen = ctx.generator("dpsgd-audit")
        pairs = p.pairs_per_doc
        background = torch.randint(BACKGROUND_TOKENS, (BACKGROUND_DOCS, pairs, 2), generator=gen)
        canary_center = BACKGROUND_TOKENS + 2 * torch.arange(m)
        canary_context = canary_center + 1
        keep = torch.as_tensor(included, dtype=torch.bool)
        inserted = torch.stack([canary_center[keep], canary_context[keep]], -1)
        docs = torch.cat([background, inserted.unsqueeze(1).expand(-1, pairs, -1)])
        vocab = BACKGROUND_TOKENS + 2 * m
        counts = torch.zeros(vocab)
        counts[:BACKGROUND_TOKENS] = 1.0
        ctx.say(f"{p.steps} DP-SGD steps, q={p.sampling_rate}, z={z:.3f}, {len(docs)} documents")
        model = self.train(docs[..., 0].to(ctx.device), docs[..., 1].to(ctx.device),
                           torch.ones(len(docs), pairs, device=ctx.device),
                           (counts / counts.sum()).to(ctx.device), dim=p.dim,
                           negatives=p.negative, noise_multiplier=z, max_grad_norm=p.max_grad_norm,
                           sampling_rate=p.sampling_rate, steps=p.steps, lr=p.lr, generator=gen)
        v, u = model.vectors.cpu(), model.out_vectors.cpu()
        scores = (v[canary_center] * u[canary_context]).sum(-1).double().numpy()
        return CanaryRun(scores, ctx.ledger.epsilon(), ctx.ledger.delta_target,
                         "document (one canary document added or removed)",
                         {"noise_multiplier": z, "documents": len(docs)})


register_defense_audit("dped_dpsgd", DpsgdCanaryAudit)
