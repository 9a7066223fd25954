"""A test plug-in that records, per process, when it is imported and when its data and model load.

Each event is appended as ``EVENT PID`` to the file named by ``$DPKIT_TEST_TRACE``, so a test can
tell what a second ``dpkit run`` did before it was refused.
"""

from __future__ import annotations

import os

from dpkit.contract.hookspecs import hookimpl
from dpkit.testing.toy import ToySpace, ToyText


def trace(event: str) -> None:
    """Append ``event`` and this process's pid to ``$DPKIT_TEST_TRACE`` (if set)."""
    path = os.environ.get("DPKIT_TEST_TRACE")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{event} {os.getpid()}\n")


trace("import")


class TracedText(ToyText):
    """The toy corpus, traced when loaded."""

    name = "traced_text"

    def load(self):
        """The toy corpus (traced)."""
        trace("data")
        return super().load()


class TracedSpace(ToySpace):
    """The toy space, traced when loaded."""

    name = "traced_space"

    def load(self, device):
        """The toy space (traced)."""
        trace("model")
        return super().load(device)


@hookimpl
def dpkit_register_datasets(register):
    register(TracedText)


@hookimpl
def dpkit_register_models(register):
    register(TracedSpace)
