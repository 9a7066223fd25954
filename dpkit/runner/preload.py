"""What the fork server imports and warms for a run's server processes, named by the client or,
for ``dpkit run``, found by the fork server itself from the spec while the client starts.

:func:`preload_servers` is the runner's side: the modules every cell's server needs and the
public CPU models to warm (:mod:`dpkit.boundary.warm`), then the fork server's start. An early
fork server (:func:`dpkit.boundary.fork_server.start_early`) imports this module after the
plug-ins: where ``dpkit run`` named its spec in :data:`SPEC_VARIABLE`, it checks the spec's cells
as the client will and imports their server modules at once — a defense's modules can take a
second to import, which the client's first cell would otherwise wait for. A spec it cannot read
changes nothing: the client names the same modules again, and reports what is wrong.
"""

from __future__ import annotations

import json
import os
from typing import Any

from dpkit.boundary.fork_server import in_fork_server

SPEC_VARIABLE = "DPKIT_FORK_SERVER_SPEC"
"""The spec ``dpkit run`` runs, for an early fork server (set in its environment only)."""


def server_modules_of(cells: list[Any], registry: Any) -> list[str]:
    """The modules the server processes of ``cells`` import: each method's defense class (for a
    mechanism, the mechanism task's and the mechanism's) and its server class — imported, no
    component built. A cell whose classes cannot be imported is left to report itself."""
    from dpkit.boundary.session import defense_class_modules
    from dpkit.contract.tasks import mechanism_task

    modules: list[str] = []
    seen: set[tuple[str, str]] = set()
    for cell in cells:
        if (cell.kind, cell.component) in seen:
            continue
        seen.add((cell.kind, cell.component))
        try:
            if cell.kind == "mechanism":
                modules.extend([*defense_class_modules(mechanism_task(registry).cls),
                                registry.get("mechanism", cell.component).cls.__module__])
            else:
                modules.extend(defense_class_modules(registry.get("defense", cell.component).cls))
        except Exception:  # noqa: BLE001 - the cell itself will report why it cannot run
            continue
    return list(dict.fromkeys(modules))


def preload_servers(cells: list[Any], registry: Any) -> None:
    """Have the fork server import every module the cells' server processes need, and load
    their public CPU models, once (:mod:`dpkit.boundary.warm`); then start it."""
    from dpkit.boundary import warm
    from dpkit.boundary.fork_server import channel_kind, preload, start_fork_server

    refs = warm.warm_references(cells)
    if refs:
        os.environ[warm.VARIABLE] = json.dumps(refs)
        os.environ[warm.VARIABLE + "_PLUGINS"] = json.dumps(dict(getattr(registry, "modules", {})))
        preload(["dpkit.boundary.warm"])
    preload(sorted(set(getattr(registry, "modules", {}).values())))
    preload(server_modules_of(cells, registry))
    if channel_kind() == "process" and cells:
        start_fork_server()


def spec_server_modules(path: str, registry: Any) -> list[str]:
    """The server modules of the cells of the spec at ``path`` (as ``dpkit run`` checks it)."""
    from dpkit.spec import check_spec, parse_structure, read_yaml

    return server_modules_of(check_spec(parse_structure(read_yaml(path), path), registry), registry)


def _import_spec_server_modules(path: str) -> None:
    import warnings

    from dpkit.contract.plugins import PluginSystem

    try:
        with warnings.catch_warnings():  # the client warns about a broken plug-in
            warnings.simplefilter("ignore")
            system = PluginSystem()  # the plug-ins as dpkit run loads them
            system.load_entry_points()
            spec_server_modules(path, system.registry)  # finding each class imported its module
    except Exception:  # noqa: BLE001 - the client checks the spec and says what is wrong
        return


if in_fork_server() and os.environ.get(SPEC_VARIABLE):
    _import_spec_server_modules(os.environ.pop(SPEC_VARIABLE))
