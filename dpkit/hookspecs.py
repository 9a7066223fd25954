"""Hook specifications: the whole plug-in boundary of dpkit.

A plug-in is a module (or object) with functions decorated by :data:`dpkit.hookimpl` whose names
are the hooks below. Each hook receives a ``register`` callback; call it once per component class.
Built-in plug-ins use exactly the same hooks and entry-point group (``dpkit``) as third-party ones.
"""

from __future__ import annotations

from typing import Callable

import pluggy

from dpkit.kinds import HOOKS as _KIND_HOOKS

hookspec = pluggy.HookspecMarker("dpkit")
hookimpl = pluggy.HookimplMarker("dpkit")

Register = Callable[[type], None]


@hookspec
def dpkit_register_mechanisms(register: Register) -> None:
    """Register :class:`dpkit.protocols.Mechanism` classes: ``register(MyMechanism)``."""


@hookspec
def dpkit_register_defenses(register: Register) -> None:
    """Register :class:`dpkit.protocols.Defense` classes: ``register(MyDefense)``."""


@hookspec
def dpkit_register_attacks(register: Register) -> None:
    """Register :class:`dpkit.protocols.Attack` classes: ``register(MyAttack)``."""


@hookspec
def dpkit_register_datasets(register: Register) -> None:
    """Register :class:`dpkit.protocols.DatasetSource` classes: ``register(MyDataset)``."""


@hookspec
def dpkit_register_models(register: Register) -> None:
    """Register :class:`dpkit.protocols.ModelSource` classes: ``register(MyModel)``."""


# hook name -> component kind, from the one kinds table (dpkit.kinds)
HOOKS: dict[str, str] = _KIND_HOOKS
