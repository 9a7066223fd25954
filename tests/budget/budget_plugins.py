"""Test plug-ins for the budget: defenses that misbehave after (or instead of) declaring, an attack
that raises, the toy corpus under a second name, and a metric-DP defense in a chosen space.

Loaded beside the toy plug-in with ``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,budget_test=
budget_plugins`` (this folder on ``sys.path``).
"""

from __future__ import annotations

import torch
from pydantic import Field

from dpkit.accounting import MetricDpGuarantee
from dpkit.contract.component import Component
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.contract.protocols import DefenseResult
from dpkit.contract.releases import declare_releases
from dpkit.release.wire import Release
from dpkit.testing.toy import ToyAttack, ToyNoise, ToyText


class ToyTextAlias(ToyText):
    """The toy corpus registered under another name (a catalogue alias)."""

    name = "toy_text_alias"


class SendsThenFails(ToyNoise):
    """Releases its embeddings, then raises (issue 42, way 2)."""

    name = "toy_sends_then_fails"

    def run(self, ctx) -> DefenseResult:
        """Send everything, then fail."""
        super().run(ctx)
        raise RuntimeError("failed after the release")


class SendsUndeclared(ToyNoise):
    """Declares its embeddings, sends them, then sends an undeclared tensor (way 6)."""

    name = "toy_sends_more"

    def run(self, ctx) -> DefenseResult:
        """The declared release, then one it never declared."""
        result = super().run(ctx)
        ctx.wire.send("hidden_states", torch.ones(4, 8))  # a name every server takes
        return result


class FailingAttack(ToyAttack):
    """An attack that raises after the release happened."""

    name = "toy_failing_attack"

    def run(self, view, ctx) -> torch.Tensor:
        """Raise."""
        raise RuntimeError("the attack failed")


class ToyMetric(Component):
    """Releases every test token under η-dχ metric DP in a named space (nothing else)."""

    name = "toy_metric"

    class Params(Params):
        eta: float = Field(5.0, gt=0)
        space: str = "toy_space"

    def releases(self, ctx) -> list[Release]:
        """One metric-DP release per test token."""
        n = sum(len(d) for d in ctx.model.encode(ctx.dataset["test"].texts))
        guarantee = MetricDpGuarantee(self.params.eta, "l2", self.params.space)
        return [Release("embeddings", guarantee, "toy_metric", count=n)]

    def run(self, ctx) -> DefenseResult:
        """Send noisy token vectors (the noise is not what is tested here)."""
        declare_releases(self, ctx)
        ids = torch.cat(ctx.model.encode(ctx.dataset["test"].texts))
        ctx.wire.send("embeddings", ctx.model.vectors[ids] + 1.0)
        return DefenseResult(metrics={"preserved": float(len(ids) > 0)},
                             truth={"token_ids": ids})


@hookimpl
def dpkit_register_datasets(register):
    register(ToyTextAlias)


@hookimpl
def dpkit_register_defenses(register):
    register(SendsThenFails)
    register(SendsUndeclared)
    register(ToyMetric)


@hookimpl
def dpkit_register_attacks(register):
    register(FailingAttack)
