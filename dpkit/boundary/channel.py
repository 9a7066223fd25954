"""Carrying a cell's bytes to its server: a fresh process per cell (default), or in-process.

:class:`ProcessChannel` starts the server in a child of a ``forkserver`` (torch, dpkit and the
plug-in packages imported once, no tensor work done there, so every child starts clean and owns
what it loads); the two ends share nothing but a pipe of bytes. :class:`InProcessChannel` runs the
same host in this process — still bytes both ways, but no isolation: it exists to measure what the
boundary costs (``bench/boundary.py``) and is refused for real runs unless asked for by name.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from typing import Any

from dpkit.base.errors import ServerError
from dpkit.boundary.fork_server import fork_context
from dpkit.boundary.host import ServerHost
from dpkit.boundary.scratch import private_temp_folder, use_temp_folder
from dpkit.boundary.threads import limit_threads, one_thread, threads_before_rules
from dpkit.release.codec import decode, encode, raise_if_error

READY_TIMEOUT_S = 600.0


class InProcessChannel:
    """The host in this process, bytes both ways (no isolation; for measurements and tests)."""

    isolated = False
    kind = "inprocess"

    def __init__(self, init: dict[str, Any], registry: Any = None,
                 defense_cls: type | None = None):
        self.host = ServerHost(decode(encode(init)), registry, defense_cls)

    def request(self, data: bytes) -> bytes:
        """Hand ``data`` to the host; return its encoded answer."""
        return self.host.handle(data)

    def close(self) -> None:
        """Drop the host."""
        self.host = None  # type: ignore[assignment]


def _serve(conn: Any, init: bytes, threads: int, scratch: str) -> None:
    """The server process: build the host, then answer requests until the pipe closes."""
    one_thread()  # until confined; the cell's threads come after the rules
    use_temp_folder(scratch)  # the client removes it when this process ends
    try:
        _answer(conn, init, scratch, threads)
    except BrokenPipeError:  # the client closed the pipe: it no longer needs this server
        return


def _answer(conn: Any, init: bytes, scratch: str, threads: int = 1) -> None:
    """Confine this process, build the host, then answer requests until the pipe closes."""
    from dpkit.boundary import fork_check
    from dpkit.boundary.confine import confine_mode, confine_server

    try:
        payload = decode(init)
        refused = fork_check.refusal(payload.get("confine") or confine_mode())
        if refused:
            raise RuntimeError(refused)
        open_device(str(payload.get("device", "cpu")))
        artifacts = server_artifacts(payload)
        if artifacts:  # values the server caches with dpkit.cached stay in its own folder
            from dpkit.base.cache import SHARED_VARIABLE

            os.environ[SHARED_VARIABLE] = os.path.join(artifacts[0], "shared")
        how: list[str] = []

        def prepare(public: Any) -> None:  # every plug-in line runs after the rules
            alone = threads_before_rules(payload.get("confine"))
            how.append(confine_server(payload.get("public_paths", []), [scratch, *artifacts],
                                      payload.get("confine"), payload.get("private_paths", []))
                       + alone + fork_check.note())
            limit_threads(threads)  # started by the confined thread: bound by its rules
            public.preload()  # the loaders, and any thread they start, are bound too

        host = ServerHost(payload, prepare=prepare)
        confinement = how[0]
    except Exception as exc:  # reported to the client, which raises it
        import traceback

        conn.send_bytes(encode({"__error__": type(exc).__name__, "message": str(exc),
                                "traceback": traceback.format_exc()}))
        return
    conn.send_bytes(encode({"ready": True, "confinement": confinement}))
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        conn.send_bytes(host.handle(data))


def open_device(device: str) -> None:
    """Make ``device``'s CUDA context now, before the confinement's rules (nothing on a CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.zeros(1, device=device)


def server_artifacts(init: dict[str, Any]) -> list[str]:
    """The server-artifact folder, made here (a confined server cannot use a folder made after
    its rules)."""
    from pathlib import Path

    folders = [Path(init["artifacts"])] if init.get("artifacts") else []
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return [str(folder) for folder in folders]


class ProcessChannel:
    """The host in a fresh child process (see the module docstring).

    With ``wait=False`` the constructor returns as soon as the process is started: the server
    then loads its public inputs while the client works, and the first :meth:`request` waits for
    it to be ready (a failure to start is raised there).
    """

    isolated = True
    kind = "process"

    def __init__(self, init: dict[str, Any], preload: list[str] | None = None, *,
                 wait: bool = True):
        import torch

        from dpkit.boundary.confine import shield_client

        shield_client()  # before the first server exists: no server can read this process
        ctx = fork_context(list(preload or []))
        self._conn, child = ctx.Pipe()
        self._turn = threading.Lock()
        self._scratch = private_temp_folder()
        self._process = ctx.Process(target=_serve, daemon=True, name="dpkit-server",
                                    args=(child, encode(init), torch.get_num_threads(),
                                          self._scratch))
        self._process.start()
        child.close()
        self._confinement: str | None = None
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until the server process is built and confined (raises why it could not be,
        after ending it)."""
        if self._confinement is None:
            try:
                ready = raise_if_error(decode(self._receive(READY_TIMEOUT_S)))
            except BaseException:
                self.close()
                raise
            self._confinement = str(ready.get("confinement", ""))

    @property
    def confinement(self) -> str:
        """How the server process is confined (``landlock ABI n``), or why it is not."""
        self.wait_ready()
        assert self._confinement is not None
        return self._confinement

    def _receive(self, timeout: float | None = None) -> bytes:
        waited = 0.0
        while not self._conn.poll(1.0):
            waited += 1.0
            if not self._process.is_alive():
                raise ServerError("ProcessExit", f"the server process exited with code "
                                  f"{self._process.exitcode} before answering")
            if timeout is not None and waited >= timeout:
                raise ServerError("Timeout", f"the server process did not start in {timeout:.0f} s")
        return self._conn.recv_bytes()

    def request(self, data: bytes) -> bytes:
        """Send ``data`` to the server process; return its encoded answer (one request at a
        time: a second thread waits, so no answer reaches the wrong caller)."""
        with self._turn:
            self.wait_ready()
            self._conn.send_bytes(data)
            return self._receive()

    def close(self, wait: bool = True) -> None:
        """Close the pipe and end the server process (``wait=False``: a background thread
        waits for it to exit, so the caller does not)."""
        try:
            self._conn.close()
        finally:
            if wait:
                _reap(self._process, self._scratch)
            else:
                reaper = threading.Thread(target=_reap, args=(self._process, self._scratch),
                                          daemon=True, name="dpkit-server-reaper")
                reaper.start()
                _REAPERS.append(reaper)

    @property
    def pid(self) -> int | None:
        """The server process's id."""
        return self._process.pid


_REAPERS: list[Any] = []


@atexit.register
def _finish_reaping() -> None:
    """At exit, let the servers closed in the background end and their temp folders go (a
    daemon thread would be stopped half-way)."""
    for reaper in _REAPERS:
        reaper.join(timeout=15)


def _reap(process: Any, scratch: str) -> None:
    """Wait for a server process whose pipe is closed to exit (kill it after 10 s), then remove
    its temp folder (a confined server cannot)."""
    process.join(timeout=10)
    if process.is_alive():
        process.kill()
        process.join()
    shutil.rmtree(scratch, ignore_errors=True)
