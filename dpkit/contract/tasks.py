"""The mechanism task: the defense a spec's ``mechanism:`` cells run, found by its capability.

The framework names no component: a spec's ``mechanism:`` entry runs inside the one registered
defense that declares ``runs_mechanisms`` (:class:`dpkit.RunsMechanisms`), whose params are the
spec's ``evaluation:`` settings plus ``mechanism`` and ``mechanism_params``.
"""

from __future__ import annotations

from typing import Any

from dpkit.base.errors import DpkitError
from dpkit.contract.registry import Entry, Registry

CAPABILITY = "runs_mechanisms"


def mechanism_task(registry: Registry) -> Entry:
    """The one registered defense that runs mechanisms (raises DpkitError for none or several)."""
    found = registry.providers("defense", CAPABILITY)
    if len(found) == 1:
        return found[0]
    if not found:
        raise DpkitError(f"mechanism entries need a defense with the capability {CAPABILITY!r} "
                         "(dpkit.RunsMechanisms), which no loaded plug-in provides; check "
                         "`dpkit plugins` for a disabled or broken plug-in")
    which = ", ".join(f"{e.name!r} (plug-in {e.plugin!r})" for e in found)
    raise DpkitError(f"several defenses declare {CAPABILITY!r}: {which}; a spec's mechanism: "
                     "cells need exactly one — disable the others with DPKIT_DISABLED_PLUGINS")


def mechanism_task_params(mechanism: str, params: dict[str, Any],
                          evaluation: dict[str, Any]) -> dict[str, Any]:
    """The mechanism task's raw params for a cell: the evaluation settings and the mechanism."""
    return {**evaluation, "mechanism": mechanism, "mechanism_params": params}
