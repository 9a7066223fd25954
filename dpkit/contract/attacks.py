"""Running an attack on a view: the attack sees what the server kept, the scorer sees the truth.

In a run the attack's ``run`` happens in the server's process (:mod:`dpkit.boundary.host` calls
:func:`attack_view`) and its guesses come back as bytes to be scored. :func:`run_attack` does both
halves in one process, for an attack's own unit tests: ``run`` gets a view with only the observed
tensors the attack ``requires`` and the public knowledge — never ``view.truth`` — and an
:class:`AttackContext` with no dataset, model or ledger; ``score`` then meets the truth.
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
