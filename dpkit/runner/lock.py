"""One ``dpkit run`` per output folder: an OS-level lock that dies with its process.

The lock is ``OUT/.dpkit-run.lock``, held with ``fcntl.flock`` for the whole run and taken
**first** (:func:`dpkit.runner.run_spec` takes it before the plug-ins load and before any data or
model is read). A second run into the same folder does not wait: it refuses at once with
:class:`OutputLockedError` (CLI exit 2) naming the holder's pid, host and start time. The kernel
drops the lock when the holding process ends in any way (SIGKILL included), so a killed run never
blocks its resume; the file itself stays behind, unlocked and harmless. A folder the lock itself
created is removed again when the run leaves nothing else in it (a spec refused by its check).
``flock`` is advisory and, on some network file systems, local to one host: two hosts writing one
NFS folder are not excluded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from dpkit.base.errors import OutputLockedError

LOCK_NAME = ".dpkit-run.lock"


class OutputLock:
    """Exclusive lock of one output folder for the duration of a ``with`` block."""

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / LOCK_NAME
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> OutputLock:
        self._created = not self.path.parent.exists()
        for _ in range(100):  # another run removed the file between our open and our flock
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = self._open_locked()
            if fd is not None:
                break
        else:
            raise OutputLockedError(f"output folder {self.path.parent}: its lock file keeps "
                                    "disappearing; is another program deleting it?")
        os.ftruncate(fd, 0)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, since {stamp}\n"
                  .encode(), 0)
        self._fd = fd
        return self

    def guards(self, out_dir: str | Path) -> bool:
        """Whether this lock is held and is the lock of ``out_dir``."""
        return self._fd is not None and \
            (Path(out_dir) / LOCK_NAME).resolve() == self.path.resolve()

    def _open_locked(self) -> int | None:
        """The locked descriptor of the file now at ``self.path``; None if that file was removed
        or replaced while we locked it (then the lock we got guards nothing: try again)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the folder was removed after our mkdir
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputLockedError(
                f"output folder {self.path.parent} is in use by another dpkit run ({holder}); "
                "wait for it to finish, or pass --out to write elsewhere") from None
        try:
            same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return None
        return fd

    def __exit__(self, *exc: object) -> None:
        if self._fd is None:
            return
        if self._created and sorted(p.name for p in self.path.parent.iterdir()) == [LOCK_NAME]:
            # nothing was written (e.g. the spec was refused): leave no empty folder behind;
            # removed while still locked, so a run that opened the old file retries (above)
            self.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # something else appeared in it meanwhile
                self.path.parent.rmdir()
        else:
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None
