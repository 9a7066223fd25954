"""Leaks around the process boundary rather than through it: files, the client's memory, secrets.

Each defense here sends the toy plug-in's honest noisy rows (a finite ledger entry), like those of
:mod:`dpkit.testing.adversaries`, and then asks its server to fetch the raw rows by a route the
wire never sees: a file the client wrote in the temp folder, the client process's memory read
through ``/proc/<pid>/mem``, or the run's noise secret read from the output folder (with it, a
server that knows dpkit regenerates the release noise and subtracts it) or replaced there with one
the server knows. A confined server
(:mod:`dpkit.boundary.confine`) must fail each with a clear error; with
``DPKIT_SERVER_CONFINE=off`` each succeeds, which shows the attempts are real. Load with
``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries,sides=dpkit.testing.side_channels``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from dpkit.base.cache import SHARED_VARIABLE, cache_root, cached, content_key
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.contract.protocols import DefenseResult
from dpkit.contract.server import Message, handles
from dpkit.release.view import ServerView
from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.testing.adversaries import LeakServer, _Leak

_HELD: list[bytes] = []
"""What the memory leak keeps alive in the client while its server searches for it."""


def _marker() -> bytes:
    return b"-".join([b"dpkit", b"side", b"channel", b"rows"])  # never a constant of this module


def drop_file(client_pid: int) -> Path:
    """Where the file leak's client writes the raw rows."""
    return Path("/tmp") / f"dpkit-side-channel-{os.getuid()}-{client_pid}.pt"


def client_pid() -> int:
    """The client's process id, seen from its server (the parent of the fork server)."""
    fields = Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


class LeakFile(_Leak):
    """Writes the raw rows to a file in the temp folder, which its server reads."""

    name = "leak_file"

    def leak(self, ctx, raw, noisy):
        """Save, then ask the server to read."""
        path = drop_file(os.getpid())
        torch.save(raw.cpu(), path)
        try:
            ctx.wire.send("read_file")
        finally:
            path.unlink(missing_ok=True)


class LeakClientMemory(_Leak):
    """Keeps the raw rows behind a marker in its own memory; its server reads that memory."""

    name = "leak_client_memory"

    def leak(self, ctx, raw, noisy):
        """Hold the rows, ask the server to search."""
        rows = raw.detach().cpu().float().contiguous()
        _HELD.append(_marker() + struct.pack("<qq", *rows.shape) + rows.numpy().tobytes())
        try:
            ctx.wire.send("read_client_memory")
        finally:
            _HELD.clear()


class LeakNoiseSecret(_Leak):
    """Its server reads the run's noise secret from the output folder (a public path)."""

    name = "leak_noise_secret"

    class Params(_Leak.Params):
        """The toy's params and the run's output folder."""

        out: str = ""

    def run(self, ctx: Any) -> DefenseResult:
        """The honest run; the truth also holds the run's secret, for scoring only."""
        result = super().run(ctx)
        secret = (ctx.noise_secret or "").split("/")[0]
        return DefenseResult(result.metrics, truth={**result.truth, "secret": secret})

    def leak(self, ctx, raw, noisy):
        """Ask the server to read it."""
        ctx.wire.send("read_secret")


class LeakReplaceSecret(LeakNoiseSecret):
    """Its server replaces the run's noise secret with one it knows (a resumed run would draw
    its release noise from it)."""

    name = "leak_replace_secret"

    def leak(self, ctx, raw, noisy):
        """Ask the server to write it."""
        ctx.wire.send("replace_secret")


class LeakSharedCache(_Leak):
    """Caches the raw rows with :func:`dpkit.cached` (``disk=True``), as a defense caches values
    computed from private data; its server, which caches a public value of its own the same way,
    then reads the client's entry."""

    name = "leak_shared_cache"

    def leak(self, ctx, raw, noisy):
        """Cache, then ask the server to read."""
        cached(PRIVATE_KIND, {"client": os.getpid()}, lambda: raw.cpu(), disk=True)
        ctx.wire.send("read_shared")


PRIVATE_KIND = "side-channel-private"


KNOWN_SECRET = "0" * 64
"""What :class:`LeakReplaceSecret`'s server writes as the run's secret."""


class SideChannelServer(LeakServer):
    """Fetches what its client left outside the wire."""

    @handles("read_file")
    def read_file(self, message: Message) -> None:
        """Load the client's file."""
        self.observe("file", torch.load(drop_file(client_pid()), weights_only=True))

    @handles("read_client_memory")
    def read_client_memory(self, message: Message) -> None:
        """Search the client's writable memory for the marker; keep the rows after it."""
        pid, marker = client_pid(), _marker()
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as memory:
            for line in maps:
                span, perms = line.split()[:2]
                start, end = (int(x, 16) for x in span.split("-"))
                if not perms.startswith("rw") or end - start > 1 << 30:
                    continue
                try:
                    memory.seek(start)
                    blob = memory.read(end - start)
                except OSError:
                    continue
                at = blob.find(marker)
                while at >= 0:
                    n, d = struct.unpack_from("<qq", blob, at + len(marker))
                    body = blob[at + len(marker) + 16: at + len(marker) + 16 + 4 * n * d]
                    if 0 < n < 1 << 20 and 0 < d < 1 << 16 and len(body) == 4 * n * d:
                        rows = np.frombuffer(body, dtype=np.float32).reshape(n, d)
                        self.observe("client_memory", torch.from_numpy(rows.copy()))
                        return
                    at = blob.find(marker, at + 1)

    @handles("read_secret")
    def read_secret(self, message: Message) -> None:
        """Read the noise secret of the run's output folder."""
        out: str = self.params.out  # type: ignore[attr-defined]
        text = (Path(out) / SECRET_FILE).read_text().strip()
        self.observe("secret", torch.tensor(list(text.encode()), dtype=torch.uint8))

    @handles("read_shared")
    def read_shared(self, message: Message) -> None:
        """Cache a public value of its own, then load the client's cached rows."""
        self.observe("own", cached("side-channel-public", {"n": 3}, lambda: torch.ones(3, 2),
                                   disk=True))
        entry = cache_root() / "shared" / PRIVATE_KIND / f"{content_key({'client': client_pid()})}.pt"
        self.observe("shared", torch.load(entry, weights_only=True))

    @handles("replace_secret")
    def replace_secret(self, message: Message) -> None:
        """Overwrite the noise secret of the run's output folder with :data:`KNOWN_SECRET`."""
        out: str = self.params.out  # type: ignore[attr-defined]
        (Path(out) / SECRET_FILE).write_text(KNOWN_SECRET + "\n")


SIDE_CHANNELS: tuple[type[_Leak], ...] = (LeakFile, LeakClientMemory, LeakNoiseSecret,
                                          LeakReplaceSecret, LeakSharedCache)
for _side in SIDE_CHANNELS:
    _side.server = SideChannelServer  # type: ignore[attr-defined]


class SecretProbe:
    """Runs where the server is: whether the server holds the run's noise secret."""

    name = "secret_probe"
    requires: ClassVar[tuple[str, ...]] = ("secret",)

    class Params(Params):
        """No parameters."""

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """The secret the server read, if any."""
        held = view.observed.get("secret")
        return {"secret": bytes(held.tolist()).decode() if held is not None else ""}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """``secret_found``: 1 when the server holds the run's secret."""
        return {"secret_found": float(bool(truth.get("secret"))
                                      and guesses["secret"] == truth["secret"])}


class PathProbe:
    """Runs where the server is, on any server: what it can read at ``paths`` (name → path), and
    its temp folder (which must be its own, writable)."""

    name = "path_probe"
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(Params):
        """The paths to try."""

        paths: dict[str, str] = {}

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """``read``: name → ``ok`` or the error's name; ``temp``: the temp folder, ``TMPDIR``."""
        import tempfile

        def tried(path: str) -> str:
            try:
                Path(path).read_bytes()
            except OSError as exc:
                return type(exc).__name__
            return "ok"

        with tempfile.NamedTemporaryFile() as scratch:  # the server's own temp folder is writable
            written = scratch.name
        return {"read": {name: tried(path) for name, path in self.params.paths.items()},
                "temp": tempfile.gettempdir(), "TMPDIR": os.environ.get("TMPDIR", ""),
                "shared": os.environ.get(SHARED_VARIABLE, ""),
                "written": written}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """Nothing to score: a probe for tests."""
        return {}


class RouteProbe:
    """Runs where the server is, on any server: tries routes a server must not take — read files
    (``read``: name → path), write files (``write``: name → path), read a process's memory
    (``memory``: ``[pid, address, length]``, e.g. the client's), open a TCP connection
    (``tcp``: ``[host, port]``, e.g. Ray's GCS), ask a named Unix socket (``unix``: a path, e.g.
    Ray's raylet or PostgreSQL's) or a UDP port (``udp``: ``[host, port]``) for an answer, send a
    datagram to a named Unix datagram socket (``datagram``: a path, e.g. journald's) from a
    socket pair — and says what each gave."""

    name = "route_probe"
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(Params):
        """The routes to try."""

        read: dict[str, str] = {}
        write: dict[str, str] = {}
        memory: list[int] = []
        tcp: list[Any] = []
        unix: str = ""
        udp: list[Any] = []
        datagram: str = ""

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """``tried``: route → ``ok`` or the error's name; ``got``: route → what was read."""
        import socket

        tried: dict[str, str] = {}
        got: dict[str, str] = {}

        def attempt(route: str, action: Any) -> None:
            try:
                value = action()
            except OSError as exc:
                tried[route] = type(exc).__name__
            else:
                tried[route] = "ok"
                if isinstance(value, bytes):
                    got[route] = value.decode(errors="replace")

        def memory(pid: int, address: int, length: int) -> bytes:
            with open(f"/proc/{pid}/mem", "rb", 0) as mem:
                mem.seek(address)
                return mem.read(length)

        def connect(host: str, port: int) -> None:
            with socket.create_connection((host, int(port)), timeout=5):
                pass

        def ask_unix(path: str) -> bytes:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(path)
                sock.sendall(b"?")
                return sock.recv(256)

        def ask_udp(host: str, port: int) -> bytes:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(5)
                sock.sendto(b"?", (host, int(port)))
                return sock.recv(256)

        def send_datagram(path: str) -> None:
            pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                pair[0].sendto(b"from the server", path)
            finally:
                for sock in pair:
                    sock.close()

        for name, path in self.params.read.items():
            attempt(f"read {name}", lambda p=path: Path(p).read_bytes())
        for name, path in self.params.write.items():
            attempt(f"write {name}", lambda p=path: Path(p).write_text("written by the server"))
        if self.params.memory:
            attempt("memory", lambda: memory(*self.params.memory))
        if self.params.tcp:
            attempt("tcp", lambda: connect(*self.params.tcp))
        if self.params.unix:
            attempt("unix", lambda: ask_unix(self.params.unix))
        if self.params.udp:
            attempt("udp", lambda: ask_udp(*self.params.udp))
        if self.params.datagram:
            attempt("datagram", lambda: send_datagram(self.params.datagram))
        return {"tried": tried, "got": got}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """Nothing to score: a probe for tests."""
        return {}


def client_memory_readable_unconfined() -> bool:
    """Whether an unconfined server of this user can read this process's memory at all (root
    can; otherwise only while this process is still dumpable and no Yama policy forbids it)."""
    import ctypes

    if os.geteuid() == 0:
        return True
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 1
    try:
        yama = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except OSError:
        yama = 0
    return dumpable and yama == 0


@hookimpl
def dpkit_register_defenses(register):
    """The side-channel leaks."""
    for cls in SIDE_CHANNELS:
        register(cls)


@hookimpl
def dpkit_register_attacks(register):
    """The secret probe, the path probe and the route probe."""
    register(SecretProbe)
    register(PathProbe)
    register(RouteProbe)
