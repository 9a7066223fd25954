"""The fork server every server process is forked from: what it imports, and when it starts.

It imports torch, dpkit's server side and the plug-ins' modules once, so that no server process
imports them again (≈ 0.7 s a cell otherwise), and loads the spec's public CPU models
(:mod:`dpkit.boundary.warm`). It starts in one of two ways:

* :func:`start_fork_server`, once the client knows its cells (the runner's ``prepare``):
  everything asked of :func:`preload` is imported as it starts;
* :func:`start_early`, by ``dpkit run`` before the client's own imports: the fork server imports
  torch and dpkit's server side while the client imports its own (on a second core, ≈ 2 s that
  the first cell waited for), then waits (:mod:`dpkit.boundary.second_stage`) until the client
  names the rest — the modules asked of :func:`preload` and what it changed in its environment
  since — which it does when the runner prepares or the first server starts.

Either way, modules asked of :func:`preload` after the fork server was told change nothing: a
server imports them itself. Nothing here imports torch.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable
from typing import Any

FIRST = ("dpkit.boundary.quiet_start", "torch", "dpkit.boundary.host")
LAST = ("dpkit.boundary.prefork", "dpkit.boundary.fork_check")  # fork_check last: one thread
SECOND_STAGE = "dpkit.boundary.second_stage"

LIST_VARIABLE = "DPKIT_FORK_SERVER_LIST"
"""Where an early fork server finds the rest of its imports (a file in the client's own temp
folder); set in the fork server's environment only, with :data:`CLIENT_VARIABLE`."""
CLIENT_VARIABLE = "DPKIT_FORK_SERVER_CLIENT"
"""The client's process id: an early fork server waits for the rest only while it lives."""

KINDS = ("process", "ray", "inprocess")

_PENDING: list[str] = []
_STARTED: list[str] = []  # the fork server's preload list, once it is started
_EARLY: dict[str, Any] = {}  # an early fork server not told the rest yet: its list file, and
#                              the client's environment as the fork server got it


def channel_kind() -> str:
    """``process`` (default), ``ray`` or ``inprocess`` from ``$DPKIT_SERVER``."""
    kind = os.environ.get("DPKIT_SERVER", "process")
    if kind not in KINDS:
        raise ValueError(f"DPKIT_SERVER must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind


def in_fork_server() -> bool:
    """Whether this process is a ``multiprocessing`` fork server (not a client, not a server)."""
    return any("multiprocessing.forkserver import main" in arg for arg in sys.orig_argv)


def preload(modules: Iterable[str]) -> None:
    """Modules the fork server imports once, so that no server process imports them again (a
    defense's client and server modules). Effective until the fork server is started, or told
    the rest when it started early; later calls change nothing."""
    _PENDING.extend(m for m in modules if m not in _PENDING)


def start_fork_server() -> None:
    """Start the fork server now, in a thread, with what :func:`preload` asked for (an early one
    is told the rest): its imports and warm models then overlap the client's own work instead
    of delaying its first send."""
    fork_context([])
    _start_in_thread()


def start_early(modules: Iterable[str] = (), environment: dict[str, str] | None = None) -> bool:
    """Start the fork server before this process knows its cells (``dpkit run`` does, before its
    own imports), importing ``modules`` after torch, with ``environment`` added to its
    environment only; False if it started already. The rest follows with the first
    :func:`fork_context` or :func:`start_fork_server`."""
    if _STARTED:
        return False
    folder = tempfile.mkdtemp(prefix=f"dpkit-fork-server-{os.getpid()}-")
    atexit.register(shutil.rmtree, folder, True)  # if the fork server never read it
    _EARLY["path"] = os.path.join(folder, "rest.json")
    _STARTED.extend(dict.fromkeys([*FIRST, *modules, SECOND_STAGE, *LAST]))
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(_STARTED))
    added = {**(environment or {}), LIST_VARIABLE: _EARLY["path"],
             CLIENT_VARIABLE: str(os.getpid())}
    os.environ.update(added)
    _EARLY["environ"], _EARLY["added"] = dict(os.environ), sorted(added)
    _start_in_thread(unset=list(added))
    return True


def fork_context(preload: list[str]) -> Any:
    """The ``forkserver`` context, its fork server's imports fixed: ``preload`` and what
    :func:`preload` asked for join them if the fork server has not started, or has started early
    and not been told the rest."""
    ctx = multiprocessing.get_context("forkserver")
    if not _STARTED:
        _STARTED.extend(dict.fromkeys([*FIRST, *_PENDING, *preload, *LAST]))
        ctx.set_forkserver_preload(list(_STARTED))
    elif _EARLY:
        _tell_rest(list(dict.fromkeys([*_PENDING, *preload])))
    return ctx


def _tell_rest(modules: list[str]) -> None:
    """Write the early fork server's second stage: ``modules`` and the environment's changes."""
    path, then, added = _EARLY.pop("path"), _EARLY.pop("environ"), _EARLY.pop("added")
    now = {k: v for k, v in os.environ.items() if k not in added}  # the fork server's own
    rest = {"modules": modules,
            "set": {k: v for k, v in now.items() if then.get(k) != v},
            "unset": sorted(set(then) - set(now))}
    partial = path + ".partial"
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        json.dump(rest, file)
    os.replace(partial, path)  # whole or absent: the fork server waits for this name


def _start_in_thread(unset: Iterable[str] = ()) -> None:
    from multiprocessing import forkserver

    def start() -> None:
        try:
            forkserver.ensure_running()
        finally:
            for name in unset:  # in the fork server's environment only
                os.environ.pop(name, None)

    threading.Thread(target=start, name="dpkit-fork-server", daemon=True).start()
