"""A server's own temp folder: made and removed by its client, since a confined server may not
remove an entry of the shared temp folder; folders whose client died are removed later, and so
are the list folders of early fork servers whose client died before either could remove them."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path


def private_temp_folder() -> str:
    """A new temp folder for one server, made by the client (which removes it when the server
    ends: a confined server may not remove an entry of the shared temp folder). The first one a
    client makes also removes the folders that clients which died left behind."""
    if not _SWEPT:
        _SWEPT.append(remove_orphaned_temp_folders(tempfile.gettempdir()))
    return tempfile.mkdtemp(prefix=f"dpkit-server-{os.getpid()}-")


_SWEPT: list[int] = []
LEGACY_AGE_S = 86_400.0


PREFIXES = ("dpkit-server-", "dpkit-fork-server-")
"""A server's temp folder, and the folder an early fork server's list is written to
(:mod:`dpkit.boundary.fork_server`), each named after its client's process id."""


def remove_orphaned_temp_folders(root: str) -> int:
    """Remove the servers' temp folders and early fork servers' list folders under ``root``
    whose client process is gone (and those without an owner in their name, from before it was
    written there, once a day old)."""
    removed = 0
    for prefix in PREFIXES:
        for folder in Path(root).glob(prefix + "*"):
            rest = folder.name[len(prefix):]
            owner = rest.split("-")[0]
            try:
                orphaned = (not _alive(int(owner)) if owner.isdigit() and "-" in rest
                            else time.time() - folder.stat().st_mtime > LEGACY_AGE_S)
            except OSError:  # removed meanwhile
                continue
            if orphaned:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def use_temp_folder(folder: str) -> None:
    """Make ``folder`` this process's temp folder (``$TMPDIR`` and :mod:`tempfile`'s): a confined
    server cannot read the shared one."""
    os.environ["TMPDIR"] = tempfile.tempdir = folder
