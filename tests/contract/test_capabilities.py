"""Capabilities, not names: a third-party mechanism that declares DxLaplaceNoise gets the split
canary audit's law check that the built-in dχ mechanism gets; one that only looks alike does not."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from pydantic import Field

import dpkit
from dpkit.contract.protocols import CAPABILITIES, DxLaplaceNoise, RunsMechanisms, capabilities_of
from dpkit.testing.strategies_tokens import random_space


class ThirdPartyDxParams(dpkit.Params):
    eta: float = Field(gt=0)
    clip_bound: float | None = None
    applied_clip: float | None = None  # a planted bug: the clip it really applies


class _AcmeDraws(dpkit.Component):
    """dχ Laplace draws, then the clip in ``applied_clip`` (else ``clip_bound``)."""

    name: ClassVar[str] = "acme_unclipped"
    domain: ClassVar[str] = "embedding"
    Params = ThirdPartyDxParams

    def guarantee(self, space: Any = None) -> dpkit.MetricDpGuarantee:
        return dpkit.MetricDpGuarantee(self.params.eta, "l2", "", "token")

    def privatize(self, x: torch.Tensor, *, space: Any = None,
                  generator: torch.Generator) -> torch.Tensor:
        noisy = x.float() + dpkit.sample_laplace_noise(len(x), x.shape[-1], self.params.eta,
                                                       generator, x.device)
        applied = self.params.applied_clip or self.params.clip_bound
        return dpkit.clip_norms(noisy, applied)


class ThirdPartyDx(_AcmeDraws):
    """Somebody else's dχ mechanism with clipping, under a name dpkit has never seen."""

    name: ClassVar[str] = "acme_clipped_dx"

    @property
    def clip_bound(self) -> float | None:
        return self.params.clip_bound


class LooksAlike(_AcmeDraws):
    """The same draws, but no clip_bound: it declares no DxLaplaceNoise, so no law is tested."""


class AcmeAudit(dpkit.SplitCanaryAudit):
    """A plug-in's split adapter: one canary token per row, sent through the wire."""

    space = random_space(64, 6, seed=3)

    def setup(self, ctx: Any) -> tuple[Any, torch.Tensor | None]:
        return self.space, None

    def send(self, ctx: Any, ids: torch.Tensor) -> float:
        self.mechanism = self.defense
        ctx.wire.declare([dpkit.Release("embeddings", self.defense.guarantee(), "canaries",
                                        count=len(ids))])
        noisy = self.defense.privatize(self.space.vectors[ids], generator=ctx.generator("up"))
        ctx.wire.send("embeddings", noisy)
        return float(self.defense.params.eta)


def context(seed: int = 0) -> dpkit.RunContext:
    """The auditor's context: an empty ledger and an in-process server that records uploads."""
    from dpkit.audit.defense import audit_context

    return audit_context(seed, 1e-5, dpkit.Registry())


def law_of(mechanism: Any, seed: int = 0) -> dict:
    included = np.random.default_rng(seed).random(2000) < 0.5
    return AcmeAudit(mechanism).audit_run(context(seed), included).law


def acme(cls: type = ThirdPartyDx, **params: Any) -> Any:
    return cls(cls.Params(**params))


def test_a_third_party_clipping_mechanism_declares_the_capability():
    assert isinstance(acme(eta=4.0, clip_bound=1.5), DxLaplaceNoise)
    assert "dx_laplace_noise" in capabilities_of(ThirdPartyDx)
    assert "dx_laplace_noise" not in capabilities_of(LooksAlike)
    assert "dx_laplace_noise" not in capabilities_of(dpkit.Noiseless)  # no noise, no law


@pytest.mark.parametrize("clip", [None, 1.5])
def test_its_uploads_get_the_law_check_and_pass(clip):
    p_value, what = law_of(acme(eta=4.0, clip_bound=clip))["upload noise"]
    assert p_value > 1e-3, what


def test_a_clip_other_than_the_declared_one_is_caught():
    """Declares a clip of 1.5, applies 0.5: the reference draws (clipped at 1.5) disagree."""
    p_value, _ = law_of(acme(eta=4.0, clip_bound=1.5, applied_clip=0.5))["upload noise"]
    assert p_value < 1e-6


def test_noise_cut_is_caught():
    """The declared η = 4 but the draws are at η = 40 (noise cut tenfold)."""
    class Quiet(ThirdPartyDx):
        def privatize(self, x: torch.Tensor, *, space: Any = None,
                      generator: torch.Generator) -> torch.Tensor:
            return ThirdPartyDx(ThirdPartyDxParams(eta=40.0)).privatize(x, generator=generator)

    p_value, _ = law_of(acme(Quiet, eta=4.0))["upload noise"]
    assert p_value < 1e-6


def test_a_mechanism_without_the_capability_gets_no_law_check():
    assert "upload noise" not in law_of(acme(LooksAlike, eta=4.0))


def test_the_built_in_dx_mechanism_declares_the_same_capability():
    laplace = dpkit.testing.process_registry().build("mechanism", "laplace_dx",
                                                     {"eta": 3.0, "clip_bound": 2.0})
    assert isinstance(laplace, DxLaplaceNoise) and laplace.clip_bound == 2.0


def test_the_mechanism_task_is_found_by_capability_and_imported_only_when_built():
    from dpkit.contract.tasks import mechanism_task

    registry = dpkit.testing.process_registry()
    entry = mechanism_task(registry)
    assert "runs_mechanisms" in entry.capabilities
    assert issubclass(entry.cls, object) and isinstance(entry.cls.runs_mechanisms, bool)
    assert "runs_mechanisms" in capabilities_of(entry.cls) and RunsMechanisms in CAPABILITIES.values()
