"""Ways to spell the raw rows in what a message carries besides its counted rows: its release's
name and its tensor's dtype and shape.

Like :mod:`dpkit.testing.wire_tricks`, each ``trick_*`` defense sends the honest noisy rows, then
spells the first raw rows' bytes in one part of the messages that counts no unit:

* ``trick_release_name`` declares one covered release per 31 bytes, named after them in hex,
  and sends one honest-sized row under each (one unit each, the name's 62 characters free);
* ``trick_width`` sends one row per byte, as wide as the byte plus one;
* ``trick_dtype`` sends one row per two bits, in one of four float dtypes;
* ``trick_padded_length`` declares padding and sends one real row per byte, followed by as many
  padding rows as the byte says (so the real rows count, the length does not);
* ``trick_padding_only`` sends, per byte, that many rows of padding and nothing real;
* ``trick_sequence_count`` sends its honest rows as one sequence, then, per byte, one real row
  followed by as many sequences of padding only as the byte says: **not refused** — how many
  sequences a message holds is its structure, which the wire treats as public (one unit
  counted per message); the threat model names it;
* ``trick_request_count`` spells the first :data:`REQUEST_ROWS` raw rows' bytes as how many
  requests (which carry no tensor and count no unit) it sends between two others: **not
  refused** — how many messages a client sends is its schedule, which the wire treats as public.

Their server (:class:`ShapeTrickServer`) reads each back. Load with
``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries,
shapes=dpkit.testing.shape_tricks``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.server import Message, handles
from dpkit.release.declaration import Release
from dpkit.testing.adversaries import LeakServer, _Leak
from dpkit.testing.wire_tricks import SPELLED_ROWS, _rows

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
REQUEST_ROWS = 2  # the request count trick spells fewer rows: a request is a round trip
NAME_BYTES = 31  # "r" and 62 hexadecimal digits: within a release name's 64 characters


def spelled(raw: torch.Tensor) -> bytes:
    """The bytes the tricks spell: those of the first :data:`SPELLED_ROWS` raw rows."""
    return raw[:SPELLED_ROWS].contiguous().cpu().numpy().tobytes()


def _chunks(data: bytes) -> list[bytes]:
    return [data[i:i + NAME_BYTES] for i in range(0, len(data), NAME_BYTES)]


class TrickReleaseName(_Leak):
    """The bytes in the names of covered releases, one row sent under each."""

    name = "trick_release_name"

    def releases(self, ctx: Any) -> list[Release]:
        """The honest release and one more per chunk of the raw bytes, covered like it."""
        (honest,) = super().releases(ctx)
        _, raw, _ = _raw(ctx)
        return [honest, *(Release("r" + chunk.hex(), honest.guarantee, honest.label, count=1)
                          for chunk in _chunks(spelled(raw)))]

    def leak(self, ctx, raw, noisy):
        """One noisy row under each spelled name."""
        ctx.wire.phase = "name"
        for chunk in _chunks(spelled(raw)):
            ctx.wire.send("r" + chunk.hex(), noisy[:1])
        ctx.wire.send("probe_request")


class _Spelling(_Leak):
    """Sends :meth:`messages` for each spelled byte under ``embeddings`` in :attr:`phase`."""

    phase: ClassVar[str] = "run"

    def messages(self, byte: int, noisy: torch.Tensor) -> list[torch.Tensor]:
        """The tensors that spell ``byte``."""
        raise NotImplementedError

    def leak(self, ctx, raw, noisy):
        """Spell every byte, then ask the server to look."""
        ctx.wire.phase = self.phase
        for byte in spelled(raw):
            for tensor in self.messages(byte, noisy):
                ctx.wire.send("embeddings", tensor)
        ctx.wire.send("probe_request")


class TrickWidth(_Spelling):
    """Each byte as the width of a one-row tensor."""

    name, phase = "trick_width", "width"

    def messages(self, byte, noisy):
        """One row, ``byte + 1`` wide."""
        return [torch.zeros(1, byte + 1)]


class TrickDtype(_Spelling):
    """Each two bits as the dtype of a one-row tensor."""

    name, phase = "trick_dtype", "dtype"

    def messages(self, byte, noisy):
        """Four rows, high bits first."""
        return [noisy[:1].to(DTYPES[(byte >> shift) & 3]) for shift in (6, 4, 2, 0)]


class _Padded(_Spelling):
    def releases(self, ctx: Any) -> list[Release]:
        """The honest release, declared with zero padding (and room for the trick's rows)."""
        (honest,) = super().releases(ctx)
        return [Release(honest.name, honest.guarantee, honest.label, honest.count,
                        covers=honest.count + 8 * SPELLED_ROWS * 4 * 64, padding=0.0)]


class TrickPaddedLength(_Padded):
    """Each byte as how many padding rows follow one real row."""

    name, phase = "trick_padded_length", "length"

    def messages(self, byte, noisy):
        """One real row, then ``byte`` padding rows."""
        message = torch.zeros(byte + 1, noisy.shape[1])
        message[0] = noisy[0]
        return [message]


class TrickPaddingOnly(_Padded):
    """Each byte as the number of rows of a message of padding only."""

    name, phase = "trick_padding_only", "count"

    def messages(self, byte, noisy):
        """``byte + 1`` rows of padding."""
        return [torch.zeros(byte + 1, noisy.shape[1])]


class TrickSequenceCount(_Padded):
    """Each byte as the number of empty sequences after one real one."""

    name, phase = "trick_sequence_count", "sequences"

    def honest_message(self, noisy):
        """The honest rows as one padded sequence, ``[1, n, d]``."""
        return noisy.unsqueeze(0)

    def messages(self, byte, noisy):
        """``[byte + 1, 1, d]``: the first sequence one real row, the others padding only."""
        message = torch.zeros(byte + 1, 1, noisy.shape[1])
        message[0, 0] = noisy[0]
        return [message]


class TrickRequestCount(_Leak):
    """Each byte as how many ``tick`` requests come before a ``tock``."""

    name = "trick_request_count"

    def leak(self, ctx, raw, noisy):
        """Tick ``byte`` times, then tock, per byte; then ask the server to look."""
        for byte in raw[:REQUEST_ROWS].contiguous().cpu().numpy().tobytes():
            for _ in range(byte):
                ctx.wire.send("tick")
            ctx.wire.send("tock")
        ctx.wire.send("probe_request")


def _raw(ctx: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from dpkit.testing.adversaries import _raw_and_noisy

    return _raw_and_noisy(ctx)


class ShapeTrickServer(LeakServer):
    """The leaks' server, which also reads what the names, dtypes and shapes spell."""

    phases: ClassVar[tuple[str, ...]] = ("name", "width", "dtype", "length", "count",
                                         "sequences")

    def __init__(self, params: Any, public: Any):
        super().__init__(params, public)
        self.spelled: dict[str, list[int]] = {phase: [] for phase in (*self.phases, "requests")}
        self.ticks = 0

    @handles("tick")
    def tick(self, message: Message) -> None:
        """Count a request."""
        self.ticks += 1

    @handles("tock")
    def tock(self, message: Message) -> None:
        """The requests counted since the last tock spell one byte."""
        self.spelled["requests"].append(self.ticks)
        self.ticks = 0

    def receive(self, message: Message) -> Any:
        """Note what each tricked message spells, then handle it."""
        tensor, got = message.tensor, self.spelled.get(message.phase)
        if tensor is None or got is None:
            return super().receive(message)
        if message.phase == "name":
            got.extend(bytes.fromhex(message.name[1:]))
        elif message.phase == "dtype":
            got.append(DTYPES.index(tensor.dtype))
        else:
            size = tensor.shape[-1] if message.phase == "width" else tensor.shape[0]
            got.append(int(size) - 1)
        return None

    def probe(self, message: Message) -> None:
        """Everything the leaks' server looks at, and the rows the tricks spelled."""
        super().probe(message)
        width = self.public.model.vectors.shape[1]
        for phase, got in self.spelled.items():
            if phase == "dtype":
                got = [sum(q << s for q, s in zip(got[i:i + 4], (6, 4, 2, 0)))
                       for i in range(0, len(got) - 3, 4)]
            if got:
                self.observe(f"spelled_{phase}", _rows(bytes(got), width))
            self.spelled[phase] = []


TRICKS = (TrickReleaseName, TrickWidth, TrickDtype, TrickPaddedLength, TrickPaddingOnly,
          TrickSequenceCount, TrickRequestCount)
for _cls in TRICKS:
    _cls.server = ShapeTrickServer  # type: ignore[union-attr]


@hookimpl
def dpkit_register_defenses(register):
    """The shape tricks."""
    for cls in TRICKS:
        register(cls)
