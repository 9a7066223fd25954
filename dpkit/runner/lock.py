"""One ``dpkit run`` per output folder: an OS-level lock that dies with its process.

The lock is ``OUT/.dpkit-run.lock``, held with ``fcntl.flock`` for the whole run. A second run
into the same folder does not wait: it refuses at once with :class:`OutputLockedError` (CLI exit
2) naming the holder's pid, host and start time. The kernel drops the lock when the holding
process ends in any way (SIGKILL included), so a killed run never blocks its resume; the file
itself stays behind, unlocked and harmless. ``flock`` is advisory and, on some network file
systems, local to one host: two hosts writing one NFS folder are not excluded.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from dpkit.base.errors import OutputLockedError

LOCK_NAME = ".dpkit-run.lock"


class OutputLock:
    """Exclusive lock of one output folder for the duration of a ``with`` block."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputLockedError(
                f"output folder {self.path.parent} is in use by another dpkit run ({holder}); "
                "wait for it to finish, or pass --out to write elsewhere") from None
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, since {stamp}\n"
                  .encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
