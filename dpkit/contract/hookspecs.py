"""Hook specifications: the whole plug-in boundary of dpkit.

A plug-in is a module (or object) with functions decorated by :data:`dpkit.hookimpl` whose names
are the hooks below. Each hook receives a ``register`` callback; call it once per component:
``register(MyMechanism)`` with the class, or ``register("my_pkg.mechanisms:MyMechanism",
name="my_mech", params="my_pkg.params:MyParams")`` to import the class only when it is first used
(``dpkit validate`` then reads only the Params module). Built-in plug-ins use exactly the same hooks
and entry-point group (``dpkit``) as third-party ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import pluggy

from dpkit.contract.kinds import HOOKS as _KIND_HOOKS

hookspec = pluggy.HookspecMarker("dpkit")
hookimpl = pluggy.HookimplMarker("dpkit")
"""Marks a plug-in's hook implementations: ``@dpkit.hookimpl def dpkit_register_mechanisms(...)``."""


class Register(Protocol):
    """The ``register`` callback a component hook receives."""

    def __call__(self, component: type | str, /, *, name: str | None = None,
                 params: type | str | None = None, capabilities: Iterable[str] = ()) -> None:
        """Register a component class, or a ``"module:Class"`` reference with its ``name``,
        ``params`` (a Params class or reference) and declared ``capabilities``."""


RegisterAudit = Callable[[str, "Callable[[Any], Any] | str"], None]


@hookspec
def dpkit_register_mechanisms(register: Register) -> None:
    """Register :class:`dpkit.contract.protocols.Mechanism` classes: ``register(MyMechanism)``."""


@hookspec
def dpkit_register_defenses(register: Register) -> None:
    """Register :class:`dpkit.contract.protocols.Defense` classes: ``register(MyDefense)``."""


@hookspec
def dpkit_register_attacks(register: Register) -> None:
    """Register :class:`dpkit.contract.protocols.Attack` classes: ``register(MyAttack)``."""


@hookspec
def dpkit_register_datasets(register: Register) -> None:
    """Register :class:`dpkit.contract.protocols.DatasetSource` classes: ``register(MyDataset)``."""


@hookspec
def dpkit_register_models(register: Register) -> None:
    """Register :class:`dpkit.contract.protocols.ModelSource` classes: ``register(MyModel)``."""


@hookspec
def dpkit_register_defense_audits(register: RegisterAudit) -> None:
    """Make defenses canary-auditable: ``register("my_defense", MyAudit)`` (or a ``"module:MyAudit"``
    reference, imported on first use) where ``MyAudit(defense)`` has ``audit_run(ctx, included)
    -> dpkit.CanaryRun`` (see docs/audit.md)."""


# hook name -> component kind, from the one kinds table (dpkit.contract.kinds)
HOOKS: dict[str, str] = _KIND_HOOKS
AUDIT_HOOK = "dpkit_register_defense_audits"
ALL_HOOKS: tuple[str, ...] = (*HOOKS, AUDIT_HOOK)
"""Every hook: one per component kind, then the defense-audit adapters' hook."""
