"""Imported last by the fork server: it must be one thread when it starts forking servers.

Every server is a fork of the fork server and inherits its memory. The fork server imports the
plug-ins and warms the spec's public models unconfined (:mod:`dpkit.boundary.warm`); a thread that
one of them started there — a model whose loading starts a thread that reads a private file a
second later — would go on unconfined, and every server forked after it would inherit what it
read. So, when its imports are done:

* a fork server with a thread besides its own and warmed models executes itself again without
  warming them (the thread and everything it read are gone; each server then loads its model
  under its rules, and says so in its confinement string);
* a fork server with such a thread still (one started by a plug-in's import) is named: every
  server forked from it refuses to start unless ``DPKIT_SERVER_CONFINE=off``
  (:func:`refusal`).
"""

from __future__ import annotations

import os
import sys

from dpkit.boundary import warm
from dpkit.boundary.fork_server import in_fork_server
from dpkit.boundary.threads import other_threads

UNWARMED = "DPKIT_FORK_SERVER_UNWARMED"
"""Set by a fork server that executed itself again without warming: the threads its warming left."""

THREADS: list[str] = []
"""The fork server's threads besides its own once its imports were done (inherited by servers)."""


def restart_unwarmed(threads: list[str]) -> None:
    """Execute this fork server again, same arguments and file descriptors, without warming."""
    environment = {k: v for k, v in os.environ.items() if k != warm.VARIABLE}
    environment[UNWARMED] = ", ".join(threads)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, environment)


def check() -> None:
    """Run once by the fork server after its imports (see the module docstring)."""
    threads = other_threads()
    if threads and os.environ.get(warm.VARIABLE):
        restart_unwarmed(threads)
    THREADS[:] = threads


def note() -> str:
    """For a server's confinement string: public models not warmed, and why (else empty)."""
    threads = os.environ.get(UNWARMED)
    if not threads:
        return ""
    return f" (models not warmed: the fork server had thread(s) besides its own: {threads})"


def refusal(mode: str) -> str:
    """Why a server forked from this fork server may not start (empty if it may): the fork server
    had threads when it began forking, and ``mode`` is not ``off``."""
    if not THREADS or mode == "off":
        return ""
    from dpkit.boundary.confine import VARIABLE

    return (f"the fork server had {len(THREADS)} thread(s) besides its own once it imported the "
            f"plug-ins ({', '.join(THREADS)}); they run unconfined and every server is a fork of "
            "it, so none may start: a plug-in module that starts a thread when it is imported "
            f"(start it lazily), or set {VARIABLE}=off to run without confinement")


if in_fork_server():  # imported once there, last; its servers inherit THREADS
    check()
