"""The server of a cell as a Ray actor (``--executor ray``): client and server may sit on different
machines, as split inference is deployed; bytes are all that pass between them."""

from __future__ import annotations

from typing import Any

from dpkit.release.codec import decode, encode, raise_if_error


class _ServerActor:
    """Ray actor body: one cell's :class:`~dpkit.boundary.host.ServerHost`, fed bytes."""

    def __init__(self, init: bytes):
        from dpkit.boundary.host import ServerHost

        try:
            self.host: Any = ServerHost(decode(init))
            self.error = None
        except Exception as exc:  # reported on the first request, with its type and message
            import traceback

            self.host, self.error = None, encode({"__error__": type(exc).__name__,
                                                  "message": str(exc),
                                                  "traceback": traceback.format_exc()})

    def request(self, data: bytes) -> bytes:
        """Answer one encoded request."""
        if self.host is None:
            assert self.error is not None
            return self.error
        return self.host.handle(data)


class RayChannel:
    """A fresh Ray actor per cell (its own worker process), placed by Ray's scheduler."""

    isolated = True

    def __init__(self, init: dict[str, Any], num_gpus: float = 0):
        import ray

        self._ray = ray
        actor = ray.remote(num_cpus=0, num_gpus=num_gpus)(_ServerActor)
        self._actor = actor.remote(encode(init))
        raise_if_error(decode(self.request(encode({"op": "tally"}))))

    def request(self, data: bytes) -> bytes:
        """Send ``data`` to the actor; return its encoded answer."""
        return self._ray.get(self._actor.request.remote(data))

    def close(self) -> None:
        """End the actor (and its worker process)."""
        self._ray.kill(self._actor)
