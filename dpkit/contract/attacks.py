"""Running an attack on a defense's view: the attack sees what crossed, the scorer sees the truth.

:func:`run_attack` is the one way the runner (and the contract suites) call an attack: ``run``
gets a view with only the observed tensors the attack ``requires`` and the public knowledge the
defense stated — never ``view.truth`` — and an :class:`AttackContext` with no dataset, model or
ledger; ``score`` then compares the guesses with the truth. :func:`private_knowledge` names the
knowledge entries that are the run's private data, which :func:`dpkit.contract.releases.settle`
records as ε = ∞.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.release.view import ServerView

if TYPE_CHECKING:
    from dpkit.contract.context import AttackContext, RunContext


def attack_view(view: ServerView, requires: tuple[str, ...]) -> ServerView:
    """What an attack may see of ``view``: its required observed entries and the knowledge."""
    return ServerView(observed={k: view.observed[k] for k in requires},
                      knowledge=dict(view.knowledge), truth={})


def run_attack(attack: Any, view: ServerView, ctx: RunContext | AttackContext) -> dict[str, float]:
    """``attack.score(attack.run(public view, attack context), truth)`` as floats.

    ``ctx`` is the cell's :class:`RunContext` (the attack gets ``ctx.for_attack()``) or an
    :class:`AttackContext` (e.g. ``AttackContext(torch.device("cpu"), seed=0)`` in tests).
    """
    from dpkit.contract.context import AttackContext as _AttackContext

    actx = ctx if isinstance(ctx, _AttackContext) else ctx.for_attack()
    guesses = attack.run(attack_view(view, tuple(attack.requires)), actx)
    return {k: float(v) for k, v in attack.score(guesses, dict(view.truth)).items()}


def private_knowledge(view: ServerView | None, ctx: RunContext) -> list[str]:
    """Knowledge keys whose value is the run's private dataset, one of its splits or texts, the
    truth itself, or the run's own context, ledger or wire."""
    from dpkit.accounting.ledger import Ledger
    from dpkit.contract.context import RunContext as _RunContext
    from dpkit.release.wire import Wire

    if view is None:
        return []
    dataset = ctx.dataset
    splits = list(getattr(dataset, "splits", {}).values()) if dataset is not None else []
    private = [dataset, *splits, *(getattr(s, "texts", None) for s in splits),
               *(getattr(s, "labels", None) for s in splits), *view.truth.values()]
    private_ids = {id(p) for p in private if p is not None}
    return sorted(key for key, value in view.knowledge.items()
                  if id(value) in private_ids or isinstance(value, (_RunContext, Ledger, Wire)))
