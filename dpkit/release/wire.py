"""The one release path: every tensor a defense sends to the untrusted side crosses a :class:`Wire`.

The server runs in its own process (:mod:`dpkit.boundary`): a defense declares its
:class:`Release`\\ s before anything is sent (each becomes one ledger spend, an uncovered one a
:class:`~dpkit.accounting.NoGuarantee` naming the tensor), then ``ctx.wire.send(name, tensor)``
copies the tensor, lets the runner's :class:`~dpkit.release.meter.Meter` count and charge it
*before* it crosses, encodes it as bytes (:mod:`dpkit.release.codec`) and hands the bytes to the
server, whose handler's answer comes back as bytes too. The server only ever holds what crossed;
the attacks run there, on what it kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import torch

from dpkit.base.errors import AccountingError
from dpkit.release.codec import decode, encode, raise_if_error, to_device
from dpkit.release.declaration import UNITS, Release  # noqa: F401 (re-exported)
from dpkit.release.labels import QUESTION, Labels
from dpkit.release.meter import DOWN, UP, Meter, tensor_bytes  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Ledger, Spend


class Channel(Protocol):
    """Bytes to the server and its answer back (a process pipe, a Ray actor, or in-process)."""

    def request(self, data: bytes) -> bytes:
        """Deliver one encoded message and return the encoded answer."""

    def close(self) -> None:
        """Stop the server side."""


class Wire:
    """The client's side of the channel to the untrusted server; see the module docstring.

    Built by the runner around its own :class:`Meter` (bound to the cell's ledger) and a
    ``connect`` function that starts the server on first use. A wire built without one (e.g.
    ``Wire(Ledger())`` for planning) declares releases but cannot send.
    """

    def __init__(self, meter: Meter | Ledger, connect: Callable[[], Channel] | None = None):
        self._meter = meter if isinstance(meter, Meter) else Meter(meter)
        self._connect = connect
        self._channel: Channel | None = None
        self.phase = "run"
        self.device: torch.device | None = None

    # ------------------------------------------------------------------ declaring
    @property
    def ledger(self) -> Ledger:
        """The cell's ledger (read-only: the runner settles the ledger it bound, whatever a
        plug-in assigns)."""
        return self._meter.ledger

    @ledger.setter
    def ledger(self, value: Ledger) -> None:
        raise AttributeError("a wire's ledger belongs to the runner and cannot be replaced; the "
                             "runner settles the ledger it bound")

    @property
    def releases(self) -> Mapping[str, Release]:
        """Declared releases by name."""
        return self._meter.releases

    @property
    def spends(self) -> Mapping[str, Spend]:
        """The ledger spend of each release that recorded one."""
        return self._meter.spends

    @property
    def units(self) -> Mapping[str, int]:
        """Units each release has carried, as the wire counted them."""
        return self._meter.units

    def declare(self, releases: Iterable[Release]) -> list[Spend]:
        """Record each release on the ledger (one spend each) before anything is sent.

        An uncovered release records its ∞ entry here, whatever its count.
        """
        return self._meter.declare(releases)

    # -------------------------------------------------------------------- sending
    def send(self, name: str, tensor: torch.Tensor | None = None) -> Any:
        """Send ``tensor`` up under release ``name``; returns the server's answer (or None).

        The wire copies the tensor, refuses a phase or request name the server did not say it
        takes (:mod:`dpkit.release.labels`), counts its units by the release's unit
        (rows the wire verifies to be the declared padding excepted), records ε = ∞ for anything
        no declaration covers — before the bytes cross — then delivers the copy as bytes. With no tensor it is
        a request: the server's handler for ``name`` answers from what it already holds.
        """
        if self._meter.closed:
            raise AccountingError(f"the wire is closed; {name!r} was sent after the run ended")
        sent = None if tensor is None else tensor.detach().to("cpu", copy=True)
        self.labels().check(self.phase, name, sent)
        real = self._meter.admit(name, sent)
        if sent is not None:
            self._meter.meter(self.phase, UP, name, tensor_bytes(sent))
            if self.device is None:
                self.device = tensor.device  # type: ignore[union-attr]
        message = {"op": "message", "name": name, "phase": self.phase, "tensor": sent,
                   "mask": real}
        answer = raise_if_error(decode(self.channel().request(encode(message))))
        self._meter.meter(self.phase, DOWN, name, _payload_bytes(answer))
        device = tensor.device if tensor is not None else self.device
        return answer if device is None or device.type == "cpu" else to_device(answer, device)

    def labels(self) -> Labels:
        """The phases and handlers the server takes, asked once, before the first message."""
        if self._meter.labels is None:
            answer = raise_if_error(decode(self.channel().request(encode(QUESTION))))
            self._meter.labels = Labels.from_answer(answer)
        return self._meter.labels

    def channel(self) -> Channel:
        """The channel to the server, started on first use."""
        if self._channel is None:
            if self._connect is None:
                raise AccountingError("this wire is not connected to a server; send through "
                                      "ctx.wire, the wire the runner gave the cell")
            self._channel = self._connect()
        return self._channel

    def end_batch(self) -> None:
        """Mark the end of one batch of the current phase."""
        self._meter.batches[self.phase] += 1

    def close(self) -> None:
        """End the run: nothing more may be sent."""
        self._meter.closed = True

    # ------------------------------------------------------------------- results
    def bytes(self, phase: str | None = None, direction: str | None = None,
              name: str | None = None) -> int:
        """Total bytes so far, optionally restricted to a phase, a direction and/or a name."""
        return sum(n for (p, d, k), n in self._meter.totals.items()
                   if (phase is None or p == phase) and (direction is None or d == direction)
                   and (name is None or k == name))

    def per_batch(self, phase: str, direction: str | None = None) -> float:
        """Mean bytes per batch of ``phase`` (0 when no batch ran)."""
        n = self._meter.batches.get(phase, 0)
        return self.bytes(phase, direction) / n if n else 0.0

    def summary(self) -> dict[str, int]:
        """Flat byte totals ``{"train_up_embeddings": bytes, ..., "total": bytes}``."""
        out = {f"{p}_{d}_{k}": n for (p, d, k), n in sorted(self._meter.totals.items()) if n}
        out["total"] = self.bytes()
        return out


def _payload_bytes(payload: Any) -> int:
    if isinstance(payload, torch.Tensor):
        return tensor_bytes(payload)
    if isinstance(payload, dict):
        return sum(_payload_bytes(v) for v in payload.values())
    if isinstance(payload, (list, tuple)):
        return sum(_payload_bytes(v) for v in payload)
    return 0

