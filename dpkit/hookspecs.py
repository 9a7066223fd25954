"""Hook specifications: the whole plug-in boundary of dpkit.

A plug-in is a module (or object) with functions decorated by :data:`dpkit.hookimpl` whose names
are the hooks below. Each hook receives a ``register`` callback; call it once per component class.
Built-in plug-ins use exactly the same hooks and entry-point group (``dpkit``) as third-party ones.
"""

from __future__ import annotations

from typing import Callable

import pluggy

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


HOOKS: dict[str, str] = {
    "dpkit_register_mechanisms": "mechanism",
    "dpkit_register_defenses": "defense",
    "dpkit_register_attacks": "attack",
    "dpkit_register_datasets": "dataset",
    "dpkit_register_models": "model",
}
