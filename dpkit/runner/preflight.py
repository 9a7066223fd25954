"""Before the first cell: the guarantees a spec's methods declare from their data.

``dpkit validate`` checks every guarantee known from params (:mod:`dpkit.spec.guarantees`). A
defense that declares its releases from the data (``releases(ctx)``: token counts, the space a
mechanism's guarantee is stated in) can only be checked with the data loaded, so ``dpkit run``
opens the first pending cell of each such method, asks for its releases without running it, and
refuses the whole spec at once — one error, the spec-level fix — where the ledger would refuse
them in every cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dpkit.contract.context import resolve_device
from dpkit.contract.protocols import DeclaresReleases
from dpkit.runner.cell import cell_context, defense_for, ledger_for
from dpkit.spec.guarantees import UNKNOWN, first_refusal, params_guarantees, refusal_error


def needs_data(cell: Any, registry: Any, privacy: Any) -> bool:
    """Whether the cell's guarantees are known only from its data (else validate checked them)."""
    if cell.kind == "mechanism":
        return params_guarantees(cell, registry, privacy) is UNKNOWN
    try:
        return isinstance(registry.build("defense", cell.component, cell.params), DeclaresReleases)
    except Exception:  # noqa: BLE001 — the cell itself reports a component that cannot be built
        return False


def preflight(spec: Any, pending: Iterable[Any], registry: Any,
              say: Callable[[str], None] = lambda _: None) -> None:
    """Raise one SpecError if the spec's ledger would refuse what a pending method's first cell
    declares from its data; anything else that goes wrong here is left to the cell to report."""
    firsts: dict[str, Any] = {}
    for cell in pending:
        firsts.setdefault(cell.method, cell)
    todo = [c for c in firsts.values() if needs_data(c, registry, spec.privacy)]
    if todo:
        say(f"checking the guarantees of {len(todo)} method(s) on their data before the first cell")
    refused = []
    for cell in todo:
        first = first_refusal(cell.method, _declared(cell, registry), spec.privacy)
        if first is not None:
            refused.append(first)
    if refused:
        raise refusal_error(spec, refused)


def _declared(cell: Any, registry: Any) -> list[Any]:
    """The guarantees of the releases ``cell`` declares (none if it cannot say without running)."""
    from dpkit.spec import PrivacySettings

    try:
        defense = defense_for(cell, registry)
        ledger = ledger_for(PrivacySettings.model_validate(cell.privacy))
        ctx = cell_context(cell, registry, resolve_device(cell.device), ledger)
        releases = defense.releases(ctx)
    except Exception:  # noqa: BLE001 — the cell will fail with its own error, as before
        return []
    return [r.guarantee for r in releases if r.guarantee is not None]
