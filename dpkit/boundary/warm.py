"""Public models loaded once in the fork server, so that no server process loads them again.

Imported by the fork server (:func:`dpkit.boundary.channel.preload`) when ``$DPKIT_SERVER_WARM``
lists model references: each is loaded there, on the CPU, into the per-process cache every
server process reads through (``load_component``). The fork server holds nothing else — a model
named in the spec is public — and each server process forked from it owns a copy-on-write copy.
Models for a GPU are not warmed (CUDA does not survive a fork); they load in each server process,
under its rules. A model that fails to load here is left to the server, which says why; one whose
loading starts a thread makes the fork server start again without warming
(:mod:`dpkit.boundary.fork_check`).
"""

from __future__ import annotations

import json
import os
from typing import Any

VARIABLE = "DPKIT_SERVER_WARM"


def warm_references(cells: list[Any]) -> list[dict[str, Any]]:
    """The distinct CPU models of ``cells`` (``{"name", "params"}``), for :data:`VARIABLE`."""
    from dpkit.contract.context import resolve_device

    refs: dict[str, dict[str, Any]] = {}
    for cell in cells:
        if cell.model and resolve_device(cell.device).type == "cpu":
            ref = {"name": cell.model["name"], "params": cell.model.get("params") or {}}
            refs[json.dumps(ref, sort_keys=True, default=str)] = ref
    return list(refs.values())


def warm_from_environment(plugins: dict[str, str]) -> int:
    """Load every model ``$DPKIT_SERVER_WARM`` names; returns how many were loaded."""
    import torch

    from dpkit.boundary.host import registry_from_modules
    from dpkit.contract.context import load_component

    refs = json.loads(os.environ.get(VARIABLE) or "[]")
    registry = registry_from_modules(plugins)
    loaded = 0
    for ref in refs:
        try:
            load_component(registry, "model", ref["name"], ref["params"], torch.device("cpu"))
        except Exception:  # noqa: BLE001 - a server loads it again, under its rules, and says why
            continue
        loaded += 1
    return loaded


if os.environ.get(VARIABLE):  # imported by the fork server: warm its cache now
    warm_from_environment(json.loads(os.environ.get(VARIABLE + "_PLUGINS") or "{}"))
