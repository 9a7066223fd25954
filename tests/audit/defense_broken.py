"""Deliberately broken defenses: each declares a guarantee its code does not deliver."""

from __future__ import annotations

import dataclasses
from unittest import mock

import torch
from dpkit_dped.aggregation import aggregate
from dpkit_dped.audit import AggregationCanaryAudit, DpsgdCanaryAudit
from dpkit_dped.defenses import DpedPate
from dpkit_dped.dpsgd import DpedDpsgd, train_dpsgd
from dpkit_snd.audit import SndCanaryAudit
from dpkit_snd.defenses import SnD

import dpkit
from dpkit.release.wire import Release


def _no_clipping(norms, max_norm):
    """Per-sample clipping factors that never scale a gradient down (noise still scaled to C)."""
    return torch.ones_like(norms)


class NoiselessDpsgd(DpedDpsgd):
    """Calibrates z and records it on the ledger, then trains with noise multiplier 0."""

    name = "broken_dpsgd_noise_not_applied"

    @staticmethod
    def train_function(*args, **kwargs):
        """train_dpsgd with the noise multiplier dropped."""
        return train_dpsgd(*args, **{**kwargs, "noise_multiplier": 0.0})


class UnclippedDpsgd(DpedDpsgd):
    """Records the clipped DP-SGD event but never clips per-sample gradients."""

    name = "broken_dpsgd_no_clipping"

    @staticmethod
    def train_function(*args, **kwargs):
        """train_dpsgd with per-sample clipping disabled (dpkit_dped.clipping)."""
        with mock.patch("dpkit_dped.clipping.clip_factors", _no_clipping):
            return train_dpsgd(*args, **kwargs)


class NoiselessThresholdPate(DpedPate):
    """Declares (and accounts) the noisy threshold check but compares the noiseless count."""

    name = "broken_pate_noiseless_threshold"

    @staticmethod
    def aggregate_function(vectors, summed, plan, **kwargs):
        """aggregate() with the threshold noise scaled to 10⁻⁹ of the plan it is given (a plan
        without threshold noise is refused outright)."""
        return aggregate(vectors, summed,
                         dataclasses.replace(plan, sigma_threshold=plan.sigma_threshold * 1e-9),
                         **kwargs)


class CleanAlongsideSnD(SnD):
    """Declares η for each upload, but uploads the clean embeddings next to the noisy ones."""

    name = "broken_split_clean_upload"

    @staticmethod
    def upload_function(ctx, client, mechanism, private):
        """Send the noisy embeddings, then the clean ones (noisy minus noise) declared at η."""
        guarantee = mechanism.guarantee(client.space)
        ctx.wire.declare([Release("hidden_states", guarantee, "token embeddings (copy)",
                                  count=int(private.mask.sum()))])
        ctx.wire.send("hidden_states", (private.x_priv - private.noise)[private.mask.bool()])
        return ctx.wire.send("embeddings", private.x_priv)


BROKEN = {NoiselessDpsgd: DpsgdCanaryAudit, UnclippedDpsgd: DpsgdCanaryAudit,
          NoiselessThresholdPate: AggregationCanaryAudit, CleanAlongsideSnD: SndCanaryAudit}


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """The broken defenses' audits: the real adapters of the defenses they break."""
    for cls, adapter in BROKEN.items():
        register(cls.name, adapter)
