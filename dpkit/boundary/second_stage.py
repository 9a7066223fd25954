"""Imported by a fork server started early (:func:`dpkit.boundary.fork_server.start_early`), after
torch and dpkit's server side: it waits here until its client names the rest of its imports, then
takes on the client's environment changes and imports them, before the fork server forks anyone.

The client writes the rest to a file in its own temp folder (whole, by renaming); the fork server
checks for it every :data:`POLL_S` seconds and ends if its client is gone first (it is no longer
the client's child). What it read is kept in :data:`CARRIED`, so that a fork server which
executes itself again (:func:`dpkit.boundary.fork_check.restart_unwarmed`) imports the same
without waiting.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import time

from dpkit.boundary.fork_server import CLIENT_VARIABLE, LIST_VARIABLE, in_fork_server

CARRIED = "DPKIT_FORK_SERVER_MODULES"
POLL_S = 0.02
NOTHING: dict = {"modules": [], "set": {}, "unset": []}
"""The rest of a fork server given no list, or no client to wait for: nothing more."""


def wait_for_rest(path: str, client: int) -> dict | None:
    """The rest the client wrote at ``path`` (the file and its folder then removed), or None if
    the client process ``client`` ended before writing it."""
    while not os.path.exists(path):
        if os.getppid() != client:
            return None
        time.sleep(POLL_S)
    with open(path) as file:
        rest = json.load(file)
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return rest


def take_environment(rest: dict) -> None:
    """Make this process's environment the client's as it is now (the variables it set or
    removed since the fork server started)."""
    os.environ.update(rest["set"])
    for name in rest["unset"]:
        os.environ.pop(name, None)


def import_all(modules: list[str]) -> None:
    """Import ``modules``, skipping one that cannot be (as the fork server does with its own
    list: the server importing it says why)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            continue


def carried() -> list[str] | None:
    """The modules this same process carried across its own restart (:data:`CARRIED` written
    with its process id, which ``execve`` keeps); None for none, or for a value inherited from
    another process (a server's environment holds its fork server's)."""
    raw = os.environ.get(CARRIED)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("pid") != os.getpid():
        return None
    return list(value["modules"])


def second_stage() -> None:
    """Wait for the rest, take it on and import it (see the module docstring)."""
    modules = carried()
    if modules is not None:
        import_all(modules)
        return
    path = os.environ.pop(LIST_VARIABLE, None)
    client = int(os.environ.pop(CLIENT_VARIABLE, "0") or 0)
    rest = wait_for_rest(path, client) if path and client else NOTHING
    if rest is None:
        raise SystemExit(0)  # its client is gone: nobody will connect
    take_environment(rest)
    os.environ[CARRIED] = json.dumps({"pid": os.getpid(), "modules": rest["modules"]})
    import_all(rest["modules"])


if in_fork_server() and (LIST_VARIABLE in os.environ or CARRIED in os.environ):
    second_stage()  # a fork server started early: before its last modules
