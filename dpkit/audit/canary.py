"""The capability a defense offers to be audited with canaries, and the registry of adapters.

A defense is auditable when it (or an adapter registered for its name) has::

    audit_run(ctx, included) -> CanaryRun

``included`` is a boolean array, one entry per canary, drawn by the auditor with probability ½
each. The defense builds its m = len(included) canaries from ``ctx`` (seeded, so the same ctx
gives the same canaries), runs its own code path with exactly the included ones inserted (a
training example, a teacher's data, a token or document sent over the wire) and records its
spends on ``ctx.ledger`` as a normal run does. Then it scores every canary — included or not —
from what an attacker sees after the run (the trained model, the released aggregate, everything
that crossed the wire): higher means "more likely included". It returns the scores with the
ε its ledger claims for one canary at ``ctx.ledger.delta_target``.

A plug-in that cannot (or should not) put the method on its defense class registers an adapter
through the ``dpkit_register_defense_audits`` hook, like every other component::

    @dpkit.hookimpl
    def dpkit_register_defense_audits(register):
        register("my_defense", MyAudit)        # MyAudit(defense).audit_run(ctx, included)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.audit.channels import ChannelRun
from dpkit.base.errors import AuditError
from dpkit.contract.protocols import AuditableDefense
from dpkit.contract.registry import Registry


@dataclass
class CanaryRun:
    """One audited run: a score per canary (higher = guessed included) and the claimed ε.

    ``claimed_epsilon`` is what the run's ledger allows for one canary at ``delta`` (the run's
    ε for a record-level unit; η·d for a token pair at distance d under metric DP); ``unit``
    names the neighbouring relation; ``details`` holds anything worth reporting (settings,
    times, the ledger table). ``channels``, when given, audits each noisy release on its own
    (:mod:`dpkit.audit.channels`): the verdict then rests on the channels, ``scores`` is
    reported beside them. ``law`` maps a test name to (p-value, what it tests): that a released
    value follows the law the declared noise implies; rejected → LAW_MISMATCH.
    """

    scores: np.ndarray
    claimed_epsilon: float
    delta: float
    unit: str
    details: dict[str, Any] = field(default_factory=dict)
    channels: list[ChannelRun] = field(default_factory=list)
    law: dict[str, tuple[float, str]] = field(default_factory=dict)

    def check(self, included: np.ndarray) -> None:
        """Raise AuditError unless there is one finite score per canary and a valid claim."""
        scores = np.asarray(self.scores, dtype=float)
        if scores.shape != included.shape:
            raise AuditError(f"audit_run returned {scores.shape} scores for {included.shape} "
                             "canaries; return one score per canary, included or not")
        if not np.isfinite(scores).all():
            raise AuditError("audit_run returned non-finite canary scores; map certainties to "
                             "large finite values (e.g. ±1e6)")
        if not (self.claimed_epsilon >= 0 and not math.isnan(self.claimed_epsilon)):
            raise AuditError(f"claimed ε must be ≥ 0 (or ∞), got {self.claimed_epsilon!r}")
        for channel in self.channels:
            if np.shape(channel.scores) != included.shape or not np.isfinite(channel.scores).all():
                raise AuditError(f"channel {channel.name!r} needs one finite score per canary")


AdapterFactory = Callable[[Any], AuditableDefense]
_LEGACY: dict[str, AdapterFactory] = {}


def register_defense_audit(name: str, factory: AdapterFactory) -> None:
    """Deprecated: register the adapter through the ``dpkit_register_defense_audits`` hook."""
    warnings.warn("register_defense_audit is deprecated: register the adapter with the "
                  "dpkit_register_defense_audits hook (docs/audit.md)", DeprecationWarning,
                  stacklevel=2)
    _LEGACY[name] = factory


def _adapters(registry: Registry) -> dict[str, AdapterFactory]:
    return {**_LEGACY, **{name: entry.factory for name, entry in registry.audits.items()}}


def auditable(defense: Any, registry: Registry) -> AuditableDefense:
    """The canary-audit capability of ``defense``: its own ``audit_run`` or a registered adapter."""
    if isinstance(defense, AuditableDefense):
        return defense
    name = getattr(defense, "name", type(defense).__name__)
    adapters = _adapters(registry)
    if name not in adapters:
        raise AuditError(f"defense {name!r} offers no canary audit: give it an "
                         "audit_run(ctx, included) method or register an adapter with the "
                         "dpkit_register_defense_audits hook (see docs/audit.md, 'Auditing "
                         f"defenses'); auditable: {', '.join(auditable_names(registry)) or 'none'}")
    return adapters[name](defense)


def auditable_names(registry: Registry) -> list[str]:
    """Registered defenses that are auditable (their own audit_run or a registered adapter)."""
    adapters = _adapters(registry)
    return sorted(n for n in registry.names("defense") if n in adapters
                  or issubclass(registry.get("defense", n).cls, AuditableDefense))
