"""More ways around the boundary, through objects a plug-in reaches by the public API.

Like :mod:`dpkit.testing.adversaries` (whose server and probe they share), each ``trick_*``
defense sends the honest noisy rows, then tries one more way to get the raw rows to where the
attacks look:

* ``trick_patched_tally`` sends the raw rows past the meter on the object ``ctx.wire.channel()``
  returns, then puts a ``request`` on that object that rewrites the server's tally to what the
  meter counted (so the runner's cross-check would find nothing odd);
* ``trick_before_attack`` puts a ``request`` there that sends the raw rows just before each
  attack, after the runner's cross-check;
* ``trick_late_thread`` leaves a thread behind that sends the raw rows once ``run`` has
  returned, again and again, until the server refuses or is gone;
* ``trick_environ`` writes the raw rows into an environment variable, which its server reads;
* ``trick_crash_after_raw`` sends the raw rows past the meter, then fails (a crash half-way:
  the caller keeps the failed cell's ledger for the budget store);
* ``trick_ledger_settings`` changes the settings of the ledger it holds (``ctx.ledger``): its δ
  to 0.5 (so its ε would read small), no ceiling and no guard (so no cap and no budget store),
  and the privacy settings it was given (``ctx.privacy``: δ and the neighbouring relation);
* ``trick_phase`` spells the raw rows in the phase (``ctx.wire.phase``) of a request;
* ``trick_batch_count`` spells the bytes of the first raw rows as how many batches it ends
  (``ctx.wire.end_batch()``) between requests, which the message's batch number once carried;
* ``trick_empty_shape`` spells the first raw rows' bits as the width of tensors with no
  elements (no rows, so no units counted).

Load with ``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries,
tricks=dpkit.testing.wire_tricks``.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from typing import Any

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from dpkit.base.errors import AccountingError
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.server import Message, handles
from dpkit.release.codec import decode, encode
from dpkit.release.meter import tensor_bytes
from dpkit.testing.adversaries import LeakServer, _Leak

ENVIRONMENT_VARIABLE = "LEAK_RAW_ROWS"
LATE_SECONDS = 5.0
SPELLED_ROWS = 16  # how many raw rows the counting tricks spell (a share of the sequence)


def raw_message(raw: torch.Tensor) -> bytes:
    """A hand-made message carrying ``raw`` as the release ``embeddings``."""
    return encode({"op": "message", "name": "embeddings", "phase": "run", "batch": 0,
                   "tensor": raw, "mask": None})


def _install(end: Any, request: Any) -> None:
    """Put ``request`` on the wire's end of the channel, if it takes one."""
    try:
        end.request = request
    except AttributeError:  # it takes no new attribute: the trick stops here
        pass


class TrickPatchedTally(_Leak):
    """Raw rows past the meter, and a tally rewritten to hide them."""

    name = "trick_patched_tally"

    def leak(self, ctx, raw, noisy):
        """Send the raw rows through the channel's end, then patch it."""
        end = ctx.wire.channel()
        forward = end.request
        forward(raw_message(raw))
        honest = {"messages": {"embeddings": 1}, "bytes": {"embeddings": tensor_bytes(noisy)}}

        def request(data: bytes) -> bytes:
            answer = forward(data)
            if decode(data).get("op") == "tally":
                told = decode(answer)
                told.update(honest)
                return encode(told)
            return answer

        _install(end, request)


class TrickBeforeAttack(_Leak):
    """Raw rows sent just before each attack, after the runner's cross-check."""

    name = "trick_before_attack"

    def leak(self, ctx, raw, noisy):
        """Patch the channel's end to send them first."""
        end = ctx.wire.channel()
        forward = end.request

        def request(data: bytes) -> bytes:
            if decode(data).get("op") == "attack":
                forward(raw_message(raw))
            return forward(data)

        _install(end, request)


class TrickLateThread(_Leak):
    """A thread that sends the raw rows once ``run`` has returned."""

    name = "trick_late_thread"

    def leak(self, ctx, raw, noisy):
        """Start it; it waits for the return, then sends until refused or the server is gone."""
        end, returned = ctx.wire.channel(), threading.Event()

        def send_late() -> None:
            returned.wait()
            deadline = time.monotonic() + LATE_SECONDS
            while time.monotonic() < deadline:
                try:
                    if "__error__" in decode(end.request(raw_message(raw))):
                        return
                except Exception:  # noqa: BLE001 - the channel closed with the cell
                    return
                time.sleep(0.001)

        threading.Thread(target=send_late, daemon=True, name="late-sender").start()
        self._returned = returned

    def run(self, ctx: Any) -> Any:
        """The honest run and the leak, then let the thread go."""
        result = super().run(ctx)
        self._returned.set()
        return result


class TrickEnviron(_Leak):
    """The raw rows in an environment variable of the client's process."""

    name = "trick_environ"

    def leak(self, ctx, raw, noisy):
        """Set it, ask the server to look, and leave it set for the cell's later servers."""
        os.environ[ENVIRONMENT_VARIABLE] = base64.b64encode(
            save_tensors({"raw": raw.contiguous().cpu()})).decode()
        ctx.wire.send("probe_request")


class TrickCrashAfterRaw(_Leak):
    """Raw rows past the meter, then a failure before ``run`` returns."""

    name = "trick_crash_after_raw"

    def leak(self, ctx, raw, noisy):
        """Send them through the channel's end, then fail."""
        ctx.wire.channel().request(raw_message(raw))
        raise RuntimeError("a crash half-way")


class TrickLedgerSettings(_Leak):
    """Reports at another δ, and lifts the cap and the budget store's guard."""

    name = "trick_ledger_settings"

    def leak(self, ctx, raw, noisy):
        """Try each; a refusal stops only that one."""
        tries = [(ctx.ledger, "delta_target", 0.5), (ctx.ledger, "ceiling", None),
                 (ctx.ledger, "guard", None), (ctx.privacy, "delta", 0.5),
                 (ctx.privacy, "neighboring", "replace_one")]
        for holder, field, value in tries:
            try:
                setattr(holder, field, value)
            except (AttributeError, AccountingError, ValueError):  # pydantic's frozen: ValueError
                pass


class TrickPhase(_Leak):
    """The raw rows, in hexadecimal, as the phase of a request."""

    name = "trick_phase"

    def leak(self, ctx, raw, noisy):
        """Name the phase after them and ask the server to look."""
        ctx.wire.phase = "raw_" + raw.contiguous().cpu().numpy().tobytes().hex()
        ctx.wire.send("probe_request")


class TrickBatchCount(_Leak):
    """Each byte of the first raw rows as the number of batches ended before a request."""

    name = "trick_batch_count"

    def leak(self, ctx, raw, noisy):
        """End that many batches, then ask; the server reads the gaps between batch numbers."""
        for byte in raw[:SPELLED_ROWS].contiguous().cpu().numpy().tobytes():
            for _ in range(byte):
                ctx.wire.end_batch()
            ctx.wire.send("probe_batch")
        ctx.wire.send("probe_request")


class TrickEmptyShape(_Leak):
    """Each 32-bit word of the first raw rows as the width of a tensor with no rows."""

    name = "trick_empty_shape"

    def leak(self, ctx, raw, noisy):
        """Send one empty tensor per word under the honest release, then ask."""
        words = raw[:SPELLED_ROWS].contiguous().cpu().view(torch.int32).reshape(-1)
        for word in words.tolist():
            ctx.wire.send("embeddings", torch.empty(0, word % 2 ** 32))
        ctx.wire.send("probe_request")


class TrickServer(LeakServer):
    """The leaks' server, which also reads the environment variable the client may have set."""

    def __init__(self, params: Any, public: Any):
        super().__init__(params, public)
        self.seen_phases: list[str] = []
        self.batches: list[int] = []
        self.widths: list[int] = []

    def receive(self, message: Message) -> Any:
        """Note every phase and every empty tensor's width, then handle the message."""
        self.seen_phases.append(message.phase)
        if message.tensor is not None and message.tensor.numel() == 0:
            self.widths.append(int(message.tensor.shape[-1]))
            return None
        return super().receive(message)

    @handles("probe_batch")
    def note_batch(self, message: Message) -> None:
        """Note the message's batch number."""
        self.batches.append(message.batch)

    @handles("probe_request")
    def probe(self, message: Message) -> None:
        """Everything the leaks' server looks at, the environment, and what the phases, batch
        numbers and empty widths spell."""
        super().probe(message)
        value = os.environ.get(ENVIRONMENT_VARIABLE)
        if value:
            self.observe("environ", load_tensors(base64.b64decode(value))["raw"])
        width = self.public.model.vectors.shape[1]
        for phase in self.seen_phases:
            if phase.startswith("raw_"):
                self.observe("phase", _rows(bytes.fromhex(phase[4:]), width))
        if self.batches:
            gaps = [b - a for a, b in zip([0, *self.batches], self.batches)]
            self.observe("batches", _rows(bytes(g % 256 for g in gaps), width))
        if self.widths:
            words = torch.tensor(self.widths, dtype=torch.int64).to(torch.int32)
            self.observe("widths", words.view(torch.float32).reshape(-1, width))
        self.seen_phases, self.batches, self.widths = [], [], []  # each read once


def _rows(data: bytes, width: int) -> torch.Tensor:
    """``data`` read as float32 rows of ``width`` (a trailing part row dropped)."""
    floats = torch.frombuffer(bytearray(data), dtype=torch.float32) if len(data) >= 4 else \
        torch.empty(0)
    return floats[:len(floats) // width * width].reshape(-1, width).clone()


TRICKS = (TrickPatchedTally, TrickBeforeAttack, TrickLateThread, TrickEnviron,
          TrickCrashAfterRaw, TrickLedgerSettings, TrickPhase, TrickBatchCount, TrickEmptyShape)
for _cls in TRICKS:
    _cls.server = TrickServer  # type: ignore[union-attr]


@hookimpl
def dpkit_register_defenses(register):
    """The tricks."""
    for cls in TRICKS:
        register(cls)
