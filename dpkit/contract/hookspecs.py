"""Hook specifications: the whole plug-in boundary of dpkit.

A plug-in is a module (or object) with functions decorated by :data:`dpkit.hookimpl` whose names
are the hooks below. Each hook receives a ``register`` callback; call it once per component class.
Built-in plug-ins use exactly the same hooks and entry-point group (``dpkit``) as third-party ones.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

from dpkit.contract.kinds import HOOKS as _KIND_HOOKS

hookspec = pluggy.HookspecMarker("dpkit")
hookimpl = pluggy.HookimplMarker("dpkit")

Register = Callable[[type], None]
RegisterAudit = Callable[[str, Callable[[Any], Any]], None]


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
    """Make defenses canary-auditable: ``register("my_defense", MyAudit)`` where ``MyAudit(defense)``
    has ``audit_run(ctx, included) -> dpkit.audit.CanaryRun`` (see docs/audit.md)."""


# hook name -> component kind, from the one kinds table (dpkit.contract.kinds)
HOOKS: dict[str, str] = _KIND_HOOKS
AUDIT_HOOK = "dpkit_register_defense_audits"
ALL_HOOKS: tuple[str, ...] = (*HOOKS, AUDIT_HOOK)
"""Every hook: one per component kind, then the defense-audit adapters' hook."""
