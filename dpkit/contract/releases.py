"""How a defense's releases reach the ledger around its run: declare first, settle after.

Plug-ins call :func:`declare_releases` first thing in ``run`` (so calling ``run`` directly, as
tests do, declares too — and binds the defense's server to ``ctx.wire``); the runner calls the
same functions for every cell (:mod:`dpkit.runner.cell`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.contract.protocols import DeclaresReleases, DefenseResult

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Spend
    from dpkit.contract.context import RunContext


def declare_releases(defense: Any, ctx: RunContext) -> list[Spend]:
    """Declare a defense's releases on ``ctx.wire`` (one ledger spend each) before it runs, and
    let the wire start the defense's server on its first send.

    Idempotent per (defense, wire): the runner calls it before ``run`` and a defense may call it
    first thing in ``run`` (so calling ``run`` directly, as tests do, declares too).
    """
    ctx.bind_server(defense)
    if not isinstance(defense, DeclaresReleases) or id(defense) in ctx.declared:
        return []
    ctx.declared.add(id(defense))
    return ctx.wire.declare(defense.releases(ctx))


def settle(result: DefenseResult, ctx: RunContext) -> DefenseResult:
    """Close the wire (nothing more may cross); a result whose ``wire_bytes`` is empty gets the
    wire's byte totals."""
    ctx.wire.close()
    if not result.wire_bytes:
        result.wire_bytes = ctx.wire.summary()
    return result


def run_defense(defense: Any, ctx: RunContext) -> DefenseResult:
    """Declare the defense's releases, run it, and settle the wire (the runner's one code path)."""
    declare_releases(defense, ctx)
    return settle(defense.run(ctx), ctx)
