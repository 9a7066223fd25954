"""Sockets Landlock leaves open, tried from a real server process: a socket file the client
listens on (as Ray's raylet or object store), one at PostgreSQL's socket path (as the budget
store's server), a UDP port, and a named Unix datagram socket reached from a socket pair. A
confined server makes no new socket, so each is refused; with ``DPKIT_SERVER_CONFINE=off`` each
gives the server the client's secret (or delivers its datagram), so the refusals are the
confinement's doing."""

from __future__ import annotations

import secrets
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import dpkit.contract.plugins
from dpkit.boundary.channel import ProcessChannel
from dpkit.boundary.confine import landlock_abi
from dpkit.boundary.seccomp import native_arch
from dpkit.release.codec import decode, encode, raise_if_error
from dpkit.boundary import seccomp

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or landlock_abi() == 0 or native_arch() is None,
    reason="server confinement needs Linux with Landlock and seccomp (x86_64 or aarch64)")
DENIED = "PermissionError"


def _answer(listener: socket.socket, secret: bytes) -> None:
    """Answer every question with ``secret`` until the listener closes."""
    while True:
        try:
            if listener.type == socket.SOCK_DGRAM:
                _, sender = listener.recvfrom(256)
                listener.sendto(secret, sender)
                continue
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.recv(1)
            connection.sendall(secret)


@pytest.fixture(scope="module")
def client_sockets():
    """The client's listeners (short paths: a socket file's name has at most 107 bytes), each
    answering with a secret of its own, and a datagram socket that keeps what it receives."""
    folder = Path(tempfile.mkdtemp(prefix="dpkit-sockets-"))
    listeners = {"unix": socket.socket(socket.AF_UNIX), "postgres": socket.socket(socket.AF_UNIX),
                 "udp": socket.socket(socket.AF_INET, socket.SOCK_DGRAM)}
    datagram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listeners["unix"].bind(str(folder / "raylet"))
    listeners["postgres"].bind(str(folder / ".s.PGSQL.5432"))
    listeners["udp"].bind(("127.0.0.1", 0))
    datagram.bind(str(folder / "journal"))
    found = {name: f"{name} secret {secrets.token_hex(8)}" for name in listeners}
    for name, listener in listeners.items():
        if listener.type == socket.SOCK_STREAM:
            listener.listen()
        threading.Thread(target=_answer, args=(listener, found[name].encode()), daemon=True).start()
    yield {"addresses": {name: listener.getsockname() for name, listener in listeners.items()},
           "secrets": found, "datagram": datagram}
    for listener in [*listeners.values(), datagram]:  # the answering threads are daemons
        listener.close()
    shutil.rmtree(folder, ignore_errors=True)


def _probe(mode: str, client: dict) -> dict:
    """Start a process server with confinement ``mode``; the route probe's findings there."""
    addresses = client["addresses"]
    init = {"defense": "toy_noise", "params": {}, "model": {"name": "toy_space", "params": {}},
            "datasets": [], "seed": 1, "device": "cpu", "confine": mode,
            "plugins": dict(dpkit.contract.plugins.get_registry().modules)}
    channel = ProcessChannel(init)
    try:
        seen: dict = {"confinement": channel.confinement, "tried": {}, "got": {}}
        for params in ({"unix": addresses["unix"], "udp": list(addresses["udp"]),
                        "datagram": str(Path(addresses["unix"]).with_name("journal"))},
                       {"unix": addresses["postgres"]}):
            ask = {"op": "attack", "name": "route_probe", "params": params, "seed": 0}
            found = raise_if_error(decode(channel.request(encode(ask))))["guesses"]
            route = "unix" if "udp" in params else "postgres"
            seen["tried"] |= {(route if k == "unix" else k): v for k, v in found["tried"].items()}
            seen["got"] |= {(route if k == "unix" else k): v for k, v in found["got"].items()}
        tally = raise_if_error(decode(channel.request(encode({"op": "tally"}))))
    finally:
        channel.close()
    datagram = client["datagram"]
    datagram.setblocking(False)
    try:
        seen["delivered"] = datagram.recv(256).decode()
    except BlockingIOError:
        seen["delivered"] = ""
    return {**seen, "tally": tally}


@pytest.fixture(scope="module")
def probed(client_sockets):
    """The route probe's findings through a confined server and an unconfined one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPKIT_LOAD_PLUGINS", "")
        patch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy,sides=dpkit.testing.side_channels")
        patch.setenv("DPKIT_BUDGET_STORE", "off")
        dpkit.contract.plugins.reset()
        try:
            yield {mode: _probe(mode, client_sockets) for mode in ("auto", "off")}
        finally:
            dpkit.contract.plugins.reset()


def test_a_confined_server_says_it_makes_no_new_socket_and_still_answers(probed):
    assert probed["auto"]["confinement"] == f"landlock ABI {landlock_abi()}; {seccomp.DESCRIPTION}"
    assert probed["off"]["confinement"] == "unconfined: DPKIT_SERVER_CONFINE=off"
    assert probed["auto"]["tally"] == probed["off"]["tally"]  # its pipe to the client still works


def test_a_confined_server_cannot_ask_a_socket_file_of_the_clients(probed, client_sockets):
    assert probed["auto"]["tried"]["unix"] == DENIED and "unix" not in probed["auto"]["got"]
    assert probed["off"]["got"]["unix"] == client_sockets["secrets"]["unix"]  # the try is real


def test_a_confined_server_cannot_reach_a_postgresql_socket(probed, client_sockets):
    assert probed["auto"]["tried"]["postgres"] == DENIED and "postgres" not in probed["auto"]["got"]
    assert probed["off"]["got"]["postgres"] == client_sockets["secrets"]["postgres"]


def test_a_confined_server_sends_no_udp_datagram(probed, client_sockets):
    assert probed["auto"]["tried"]["udp"] == DENIED and "udp" not in probed["auto"]["got"]
    assert probed["off"]["got"]["udp"] == client_sockets["secrets"]["udp"]


def test_a_confined_server_makes_no_datagram_pair_to_reach_a_named_socket(probed):
    assert probed["auto"]["tried"]["datagram"] == DENIED and probed["auto"]["delivered"] == ""
    assert probed["off"]["tried"]["datagram"] == "ok"
    assert probed["off"]["delivered"] == "from the server"  # the control's, not the confined's
