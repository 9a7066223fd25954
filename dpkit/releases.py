"""Running a defense through the release path: declare, run, settle. Shared by run and plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.protocols import DeclaresReleases, DefenseResult

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Spend
    from dpkit.context import RunContext


def defense_for(cell: Any, registry: Any) -> Any:
    """The defense a cell runs: the named one, or ``privatize_text`` around a mechanism."""
    from dpkit.spec import MECHANISM_TASK

    if cell.kind == "mechanism":
        params = {**cell.evaluation, "mechanism": cell.component, "mechanism_params": cell.params}
        return registry.build("defense", MECHANISM_TASK, params)
    return registry.build("defense", cell.component, cell.params)


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
    """Close the wire and record ε = ∞ for any view entry that did not cross it.

    Attacks then see only what the server could see, and a result whose ``wire_bytes`` is empty
    gets the wire's byte totals.
    """
    ctx.wire.close()
    for key in ctx.wire.unsent(result.view):
        ctx.ledger.spend(NoGuarantee(f"server view {key!r} did not cross dpkit's wire; what it "
                                     "reveals is not accounted"), label=f"view {key} (unsent)")
    if not result.wire_bytes and ctx.wire.totals:
        result.wire_bytes = ctx.wire.summary()
    return result


def run_defense(defense: Any, ctx: RunContext) -> DefenseResult:
    """Declare the defense's releases, run it, and settle the wire (the runner's one code path)."""
    declare_releases(defense, ctx)
    return settle(defense.run(ctx), ctx)
