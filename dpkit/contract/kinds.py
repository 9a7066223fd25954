"""The one table of component kinds: hook name, protocol, and what the registry requires.

Everything that lists kinds (the hook specifications, the registry, ``dpkit plugins``) reads it
from here; adding a kind means one row below, one hook specification in :mod:`dpkit.contract.hookspecs`
and one protocol in :mod:`dpkit.contract.protocols`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One component kind."""

    name: str                        # registry kind, e.g. "mechanism"
    hook: str                        # the hook that registers it
    protocol: str                    # class name in dpkit.contract.protocols (PROTOCOLS)
    methods: tuple[str, ...]         # methods every component of the kind must define
    plural: str                      # for listings


KIND_TABLE: tuple[Kind, ...] = (
    Kind("mechanism", "dpkit_register_mechanisms", "Mechanism", ("guarantee", "privatize"),
         "mechanisms"),
    Kind("defense", "dpkit_register_defenses", "Defense", ("run",), "defenses"),
    Kind("attack", "dpkit_register_attacks", "Attack", ("run", "score"), "attacks"),
    Kind("dataset", "dpkit_register_datasets", "DatasetSource", ("load",), "datasets"),
    Kind("model", "dpkit_register_models", "ModelSource", ("load",), "models"),
)

DECLARED_CAPABILITIES: dict[str, str] = {"runs_mechanisms": "runs_mechanisms",
                                         "reads_files": "reads_files"}
"""Capabilities the framework looks up before a component's class is imported, each with the
class attribute that marks it (true): a spec's ``mechanism:`` cells need the defense that runs
mechanisms (:class:`dpkit.RunsMechanisms`), ``dpkit budget cap FILE`` the dataset that reads a
local file (:class:`dpkit.ReadsFiles`). A component registered by reference declares these
(``register(..., capabilities=("runs_mechanisms",))``); the registry checks the class on import."""


def declared_capabilities(cls: object) -> frozenset[str]:
    """The :data:`DECLARED_CAPABILITIES` a component class marks."""
    return frozenset(name for name, marker in DECLARED_CAPABILITIES.items()
                     if getattr(cls, marker, False) is True)


KINDS: tuple[str, ...] = tuple(k.name for k in KIND_TABLE)
BY_NAME: dict[str, Kind] = {k.name: k for k in KIND_TABLE}
HOOKS: dict[str, str] = {k.hook: k.name for k in KIND_TABLE}
