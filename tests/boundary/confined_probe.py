"""Run in a fresh process by tests/boundary/test_confine.py: confine this process as a server
(:func:`dpkit.boundary.confine.confine_server`), then try each route a server must not take and
print, as JSON, how it confined itself, its capabilities and what each try gave ("ok" or the
error's name). Argument: a JSON object of ``readable``, ``writable``, ``private``, ``mode``
(the confinement's arguments), ``loose`` (a module file to import first, from a folder on no
path), ``preimport`` and ``import`` (modules to import before, and once confined), ``read``,
``list``, ``write``, ``truncate`` (name → path), ``move`` (name → [from, to]), ``tcp_port``,
``abstract`` (an abstract Unix socket's name), ``client`` (a process id to signal), ``unix`` (a
named Unix socket's path), ``udp_port`` and ``shm`` (a System V shared memory segment's id);
``sockets`` says what each way of making a socket gave (:func:`_socket_tries`, and a thread
started before the confinement), ``ipc`` each way to another process's memory
(:func:`_ipc_tries`)."""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import mmap
import os
import socket
import sys
import threading
import time
from pathlib import Path


def _try(action) -> str:
    try:
        action()
    except OSError as exc:
        return type(exc).__name__
    return "ok"


def _status() -> dict[str, str]:
    lines = Path("/proc/self/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if line.startswith(("Cap", "NoNewPrivs")))


def _connect(family: int, address: object) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(address)


def _syscall(number: int, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, *args) < 0:
        raise OSError(ctypes.get_errno(), f"syscall {number}")


def _i386_socket() -> None:
    """socket(AF_UNIX, SOCK_STREAM, 0) through i386's ``int 0x80`` (call 359 there)."""
    code = bytes.fromhex("53" "b867010000" "bb01000000" "b901000000" "31d2" "cd80" "5b" "c3")
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    done = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    if done < 0:
        raise OSError(-done, "int 0x80")


def _socket_tries(spec: dict) -> dict[str, str]:
    """Each way of making a socket (or reaching one): ``ok`` or the error's name."""
    def udp() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"x", ("127.0.0.1", spec["udp_port"]))

    def pair(kind: int) -> None:
        for sock in socket.socketpair(socket.AF_UNIX, kind):
            sock.close()

    tries = {"unix": lambda: _connect(socket.AF_UNIX, spec["unix"]), "udp": udp,
             "netlink": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close(),
             "pair stream": lambda: pair(socket.SOCK_STREAM | socket.SOCK_CLOEXEC),
             "pair datagram": lambda: pair(socket.SOCK_DGRAM),
             "x32": lambda: _syscall(41 | 0x40000000, socket.AF_UNIX, socket.SOCK_STREAM, 0),
             "io_uring": lambda: _syscall(425, 4, ctypes.create_string_buffer(120))}
    if os.uname().machine == "x86_64":
        tries["i386"] = _i386_socket
    return {name: _try(action) for name, action in tries.items()}


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _ipc_tries(spec: dict) -> dict[str, str]:
    """Each System V and POSIX IPC route (attaching the client's shared memory ``shm``, making
    new ones), and each way into another process's memory or descriptors (a child of this one,
    which the rules would let it trace): ``ok`` or the error's name. What an unconfined try made
    is removed again."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p

    def made(result: int, remove=None) -> None:
        if result == -1:
            raise OSError(ctypes.get_errno(), "refused")
        if remove is not None:
            remove(result)

    def attach() -> None:
        address = libc.shmat(spec["shm"], None, 0o10000)  # SHM_RDONLY
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "shmat")
        libc.shmdt(ctypes.c_void_p(address))

    queue = f"/dpkit-probe-{os.getpid()}".encode()
    secret = ctypes.create_string_buffer(b"in this process only")
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)

    def read_child() -> None:
        local = ctypes.create_string_buffer(len(secret))
        mine = _Iovec(ctypes.cast(local, ctypes.c_void_p), len(secret))
        theirs = _Iovec(ctypes.cast(secret, ctypes.c_void_p), len(secret))
        made(libc.process_vm_readv(child, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0))

    def take_descriptor() -> None:
        pidfd = libc.syscall(434, child, 0)  # pidfd_open: allowed
        made(pidfd)
        try:
            made(libc.syscall(438, pidfd, 0, 0), os.close)  # pidfd_getfd(pidfd, 0, 0)
        finally:
            os.close(pidfd)

    tries = {"shm attach": attach,
             "shm new": lambda: made(libc.shmget(0, 4096, 0o600), lambda i: libc.shmctl(i, 0, None)),
             "message queue": lambda: made(libc.msgget(0, 0o600), lambda i: libc.msgctl(i, 0, None)),
             "semaphore": lambda: made(libc.semget(0, 1, 0o600), lambda i: libc.semctl(i, 0, 0)),
             "posix queue": lambda: made(libc.mq_open(queue, os.O_CREAT | os.O_RDWR, 0o600, None),
                                         lambda fd: (os.close(fd), libc.mq_unlink(queue))),
             "ptrace": lambda: made(libc.ptrace(0x4206, child, None, None)),  # PTRACE_SEIZE
             "process_vm_readv": read_child, "pidfd_getfd": take_descriptor}
    try:
        return {name: _try(action) for name, action in tries.items()}
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


def main(spec: dict) -> dict:
    """Confine, then try every route of ``spec``."""
    from dpkit.boundary.confine import confine_server

    loose = importlib.util.spec_from_file_location("loose_module", spec["loose"])
    assert loose is not None and loose.loader is not None
    sys.modules["loose_module"] = module = importlib.util.module_from_spec(loose)
    loose.loader.exec_module(module)
    for name in spec["preimport"]:
        importlib.import_module(name)
    go, thread_tried = threading.Event(), {}

    def in_a_thread() -> None:  # started before the confinement, as torch's threads are
        go.wait()
        thread_tried["unix socket"] = _try(lambda: socket.socket(socket.AF_UNIX).close())

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    how = confine_server(spec["readable"], spec["writable"], spec.get("mode"), spec["private"])
    go.set()
    thread.join()
    return {"how": how, "status": _status(),
            "read": {name: _try(lambda p=path: Path(p).read_bytes())
                     for name, path in spec["read"].items()},
            "list": {name: _try(lambda p=path: os.listdir(p)) for name, path in spec["list"].items()},
            "write": {name: _try(lambda p=path: Path(p).write_text("written"))
                      for name, path in spec["write"].items()},
            "truncate": {name: _try(lambda p=path: os.truncate(p, 0))
                         for name, path in spec["truncate"].items()},
            "move": {name: _try(lambda m=move: os.rename(*m)) for name, move in spec["move"].items()},
            "import": {name: _try(lambda n=name: importlib.import_module(n))
                       for name in spec["import"]},  # modules not imported before
            "tcp": _try(lambda: _connect(socket.AF_INET, ("127.0.0.1", spec["tcp_port"]))),
            "abstract": _try(lambda: _connect(socket.AF_UNIX, "\0" + spec["abstract"])),
            "signal": _try(lambda: os.kill(spec["client"], 0)),
            "sockets": {**_socket_tries(spec), **thread_tried}, "ipc": _ipc_tries(spec)}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
