"""The server of a cell as a Ray actor (``--executor ray``): client and server may sit on different
machines, as split inference is deployed; bytes are all that pass between them.

The actor does not run the server's code itself: it relays bytes to a confined server process of
its own (a :class:`~dpkit.boundary.channel.ProcessChannel` started on the actor's machine), so a
Ray server is confined exactly as a process server is (:mod:`dpkit.boundary.confine`). Confining
the Ray worker in place would not be enough: the server's code would share the process with Ray's
own connections, and through them could start a task or an actor of its own — unconfined, on any
machine of the cluster — and have it read what it may not. The server process holds no Ray
connection and may open no TCP connection. The actor is killed (never restarted) on close.
"""

from __future__ import annotations

from typing import Any

from dpkit.release.codec import decode, encode, raise_if_error


class _ServerActor:
    """Ray actor body: starts one cell's confined server process and relays its bytes."""

    def __init__(self, init: bytes, preload: list[str]):
        from dpkit.boundary.channel import ProcessChannel

        try:
            self.channel: Any = ProcessChannel(decode(init), preload=preload)
            self.error = None
        except Exception as exc:  # reported on the first request, with its type and message
            import traceback

            from dpkit.base.errors import ServerError

            if isinstance(exc, ServerError):  # the server process's own failure, as it raised it
                kind, message, trace = exc.kind, exc.message, exc.remote_traceback
            else:
                kind, message, trace = type(exc).__name__, str(exc), traceback.format_exc()
            self.channel = None
            self.error = encode({"__error__": kind, "message": message, "traceback": trace})

    def request(self, data: bytes) -> bytes:
        """Answer one encoded request (the server process's answer)."""
        if self.channel is None:
            assert self.error is not None
            return self.error
        return self.channel.request(data)

    def confinement(self) -> str:
        """How the server process is confined (``landlock ABI n``), or why it is not."""
        return "" if self.channel is None else self.channel.confinement

    def pids(self) -> list[int]:
        """This actor's process id and its server process's (for tests)."""
        import os

        return [os.getpid(), *([self.channel.pid] if self.channel is not None else [])]

    def close(self) -> None:
        """End the server process and remove its temp folder (the actor is killed next)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None


class RayChannel:
    """A fresh Ray actor per cell (its own worker process), placed by Ray's scheduler; the actor
    runs the cell's server in a confined process of its own (see the module docstring)."""

    isolated = True
    kind = "ray"

    def __init__(self, init: dict[str, Any], num_gpus: float = 0,
                 preload: list[str] | None = None):
        import ray

        from dpkit.boundary.confine import shield_client

        shield_client()  # the client's process: no server reads its memory
        self._ray = ray
        actor = ray.remote(num_cpus=0, num_gpus=num_gpus, max_restarts=0,
                           max_task_retries=0)(_ServerActor)
        self._actor = actor.remote(encode(init), list(preload or []))
        try:
            raise_if_error(decode(self.request(encode({"op": "tally"}))))
            self._confinement = str(ray.get(self._actor.confinement.remote()))
        except BaseException:
            self.close()
            raise

    @property
    def confinement(self) -> str:
        """How the server process under the actor is confined (``landlock ABI n``), or why it
        is not."""
        return self._confinement

    def request(self, data: bytes) -> bytes:
        """Send ``data`` to the actor; return its encoded answer."""
        return self._ray.get(self._actor.request.remote(data))

    def close(self) -> None:
        """End the server process (its temp folder removed), then kill the actor and its worker
        process, which Ray does not restart."""
        try:
            self._ray.get(self._actor.close.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
            pass
        finally:
            self._ray.kill(self._actor, no_restart=True)
