"""How a defense's releases reach the ledger around its run: declare first, settle after.

Plug-ins call :func:`declare_releases` first thing in ``run`` (so calling ``run`` directly, as
tests do, declares too); the runner calls the same functions for every cell
(:mod:`dpkit.runner.cell`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.contract.attacks import private_knowledge
from dpkit.contract.protocols import DeclaresReleases, DefenseResult

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Spend
    from dpkit.contract.context import RunContext


def declare_releases(defense: Any, ctx: RunContext) -> list[Spend]:
    """Declare a defense's releases on ``ctx.wire`` (one ledger spend each) before it runs.

    Idempotent per (defense, wire): the runner calls it before ``run`` and a defense may call it
    first thing in ``run`` (so calling ``run`` directly, as tests do, declares too).
    """
    if not isinstance(defense, DeclaresReleases) or id(defense) in ctx.wire.declared_by:
        return []
    ctx.wire.declared_by.add(id(defense))
    return ctx.wire.declare(defense.releases(ctx))


def settle(result: DefenseResult, ctx: RunContext) -> DefenseResult:
    """Close the wire; record ε = ∞ for any view entry that did not cross it and any knowledge
    entry that is the run's private data.

    Attacks then see only what the server could see, and a result whose ``wire_bytes`` is empty
    gets the wire's byte totals.
    """
    ctx.wire.close()
    for key in ctx.wire.unsent(result.view):
        ctx.ledger.spend(NoGuarantee(f"server view {key!r} did not cross dpkit's wire; what it "
                                     "reveals is not accounted"), label=f"view {key} (unsent)")
    for key in private_knowledge(result.view, ctx):
        ctx.ledger.spend(NoGuarantee(f"attack knowledge {key!r} is the run's private data (or its "
                                     "context); attacks may only know public things"),
                         label=f"knowledge {key} (private)")
    if not result.wire_bytes and ctx.wire.totals:
        result.wire_bytes = ctx.wire.summary()
    return result


def run_defense(defense: Any, ctx: RunContext) -> DefenseResult:
    """Declare the defense's releases, run it, and settle the wire (the runner's one code path)."""
    declare_releases(defense, ctx)
    return settle(defense.run(ctx), ctx)
