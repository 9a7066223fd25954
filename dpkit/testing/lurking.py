"""Public model plug-ins that reach for a private file when they load in a server: one starts a
thread that reads it a second later (Landlock binds only the thread that asks and the threads it
starts after), one reads it in ``load()`` itself. A server loads its model after its rules, so
both are refused; with ``DPKIT_SERVER_CONFINE=off`` each reads the file, which shows the attempt
is real. The file is :func:`lurk_path` in the shared temp folder (not a model parameter: those
become public paths, which a server may read). Load with
``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,lurk=dpkit.testing.lurking``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import torch

from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.release.view import ServerView
from dpkit.testing.toy import ToySpace

_STOLEN: dict[str, str] = {}


def lurk_path() -> Path:
    """The private file the lurker reads: in the shared temp folder, out of a server's reach."""
    return Path("/tmp") / f"dpkit-lurk-{os.getuid()}.txt"


def _lurk(path: str, delay: float) -> None:
    time.sleep(delay)  # until the server has confined itself
    try:
        _STOLEN["read"] = Path(path).read_text()
    except OSError as exc:
        _STOLEN["read"] = type(exc).__name__


class LurkingSpace(ToySpace):
    """The toy space, whose loading starts a thread named ``lurker``."""

    name = "lurking_space"

    def load(self, device: torch.device):
        """Start the lurker, then load the toy space."""
        threading.Thread(target=_lurk, args=(str(lurk_path()), 1.0), name="lurker",
                         daemon=True).start()
        return super().load(device)


class PryingSpace(ToySpace):
    """The toy space, whose loading reads the private file (on the loading thread)."""

    name = "prying_space"

    def load(self, device: torch.device):
        """Read the file, then load the toy space."""
        _lurk(str(lurk_path()), 0.0)
        return super().load(device)


class LurkProbe:
    """What the lurker read (waits for it), and the server's torch threads."""

    name = "lurk_probe"
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(Params):
        """No parameters."""

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """``read``: the file's text or the error's name; ``torch_threads``."""
        for _ in range(100):
            if "read" in _STOLEN:
                break
            time.sleep(0.05)
        return {"read": _STOLEN.get("read", ""), "torch_threads": torch.get_num_threads()}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """``read_private_file``: 1 when what the server read is the private file's text."""
        try:
            private = lurk_path().read_text()
        except OSError:
            private = None
        return {"read_private_file": float(guesses["read"] == private)}


@hookimpl
def dpkit_register_models(register):
    """The lurking and the prying space."""
    register(LurkingSpace)
    register(PryingSpace)


@hookimpl
def dpkit_register_attacks(register):
    """The lurk probe."""
    register(LurkProbe)
