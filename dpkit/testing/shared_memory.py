"""An attack plug-in that looks for the client's data outside files: it lists the System V shared
memory segments (``/proc/sysvipc/shm``, readable by every process), attaches each one read-only
and returns what it holds, and tries to open a POSIX message queue the client named. A confined
server is refused both (:mod:`dpkit.boundary.seccomp`); with ``DPKIT_SERVER_CONFINE=off`` it reads
the segment, which shows the attempt is real. Load with
``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,ipc=dpkit.testing.shared_memory``.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import Any, ClassVar

from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.release.view import ServerView

SEGMENT_BYTES = 4096


def segment_ids() -> list[int]:
    """The ids of this machine's System V shared memory segments (empty where none are listed)."""
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return []
    return [int(line.split()[1]) for line in lines if line.split()]


def read_segment(segment: int) -> bytes:
    """The first bytes of segment ``segment``, attached read-only (``OSError`` if refused)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    address = libc.shmat(segment, None, 0o10000)  # SHM_RDONLY
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    try:
        return ctypes.string_at(address, SEGMENT_BYTES)
    finally:
        libc.shmdt(ctypes.c_void_p(address))


def make_segment(data: bytes) -> int:
    """A new private System V shared memory segment of this process holding ``data``: its id
    (``OSError`` where the system has none). Remove it with :func:`remove_segment`."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, SEGMENT_BYTES, 0o600)  # IPC_PRIVATE
    if segment == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    address = libc.shmat(segment, None, 0)
    ctypes.memmove(address, data, min(len(data), SEGMENT_BYTES))
    libc.shmdt(ctypes.c_void_p(address))
    return segment


def remove_segment(segment: int) -> None:
    """Remove segment ``segment`` (IPC_RMID)."""
    ctypes.CDLL(None).shmctl(segment, 0, None)


class SharedMemoryProbe:
    """Reads every shared memory segment it can attach (see the module docstring)."""

    name = "shared_memory_probe"
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(Params):
        """The message queue to try (a name the client gave its own)."""

        queue: str = ""

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """``segments``: id → ``{"read": hex}`` or ``{"refused": error name}``; ``queue``: ``ok``
        or the error's name."""
        segments: dict[str, dict[str, str]] = {}
        for segment in segment_ids():
            try:
                segments[str(segment)] = {"read": read_segment(segment).hex()}
            except OSError as exc:
                segments[str(segment)] = {"refused": type(exc).__name__}
        queue = "not tried"
        if self.params.queue:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.mq_open(self.params.queue.encode(), os.O_RDONLY, 0, None)
            queue = "ok" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "error")
            if fd >= 0:
                os.close(fd)
        return {"segments": segments, "queue": queue}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """``segments_read``: how many segments the server read."""
        return {"segments_read": float(sum("read" in v for v in guesses["segments"].values()))}


@hookimpl
def dpkit_register_attacks(register):
    """The shared memory probe."""
    register(SharedMemoryProbe)
