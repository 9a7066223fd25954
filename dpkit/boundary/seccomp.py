"""A confined server makes no new socket and reaches no other process: a seccomp filter, after
Landlock (:mod:`.confine`).

Landlock (to ABI 7) rules files, TCP and abstract Unix sockets, but not a *named* Unix socket (a
socket file) nor UDP: a server that knows a path could connect to Ray's raylet or object store, to
the budget store's PostgreSQL, to D-Bus; and it could send a datagram anywhere. A server talks to
its client only through the pipe it inherits, so the filter refuses (``EACCES``) every
``socket()``, whatever its domain, and ``socketpair()`` but for a pair of stream sockets
(``multiprocessing`` and ``asyncio`` make those; a datagram pair could ``sendto()`` a named
datagram socket). It also refuses ``io_uring_setup()``, whose rings make sockets without the
``socket()`` call, the x32 calls (``nr`` ≥ ``0x40000000`` on x86_64) and every call of another
architecture (i386's ``socketcall`` through ``int 0x80``): a filter sees each call's
architecture, and the same number means another call there.

Files and sockets are not the only shared places: System V shared memory, message queues and
semaphores are named by numbers any process can list (``/proc/sysvipc``) and try, and POSIX
message queues by names outside the file system Landlock rules. The filter refuses every one of
those calls (:data:`REFUSED_CALLS`), and the calls that read or steer another process —
``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd`` — which the client's
non-dumpable flag already bars from it: two measures, each enough. The filter covers every thread
of the process (``SECCOMP_FILTER_FLAG_TSYNC``) and every child it starts.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import NamedTuple

DESCRIPTION = "seccomp: no new sockets, IPC or tracing"
_SET_MODE_FILTER, _FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LOAD_WORD, _JUMP_EQUAL, _JUMP_AT_LEAST, _AND, _RETURN = 0x20, 0x15, 0x35, 0x54, 0x06
_NR, _ARCH, _SECOND_ARGUMENT = 0, 4, 24  # offsets in struct seccomp_data (little-endian)
_X32_BIT, _SOCK_TYPE_MASK, _SOCK_STREAM = 0x40000000, 0xF, 1
_IO_URING_SETUP = 425  # the same on every architecture
# the instructions that jump nowhere (the kernel reads jumps only from the jump instructions)
_LOAD_ARCH, _LOAD_NR = (_LOAD_WORD, 0, 0, _ARCH), (_LOAD_WORD, 0, 0, _NR)
_LOAD_SOCKET_TYPE, _TYPE_LESS_FLAGS = (_LOAD_WORD, 0, 0, _SECOND_ARGUMENT), (_AND, 0, 0, _SOCK_TYPE_MASK)
_REFUSE, _ALLOW = (_RETURN, 0, 0, _RET_ERRNO | errno.EACCES), (_RETURN, 0, 0, _RET_ALLOW)


REFUSED_CALLS = ("shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget",
                 "semop", "semtimedop", "semctl", "mq_open", "ptrace", "process_vm_readv",
                 "process_vm_writev", "pidfd_getfd")
"""Refused outright besides ``socket()`` and ``io_uring_setup()`` (see the module docstring)."""


class Arch(NamedTuple):
    """An architecture's audit value and the numbers of the calls the filter looks at
    (``refused``: those of :data:`REFUSED_CALLS`, in its order)."""

    audit: int
    socket: int
    socketpair: int
    seccomp: int
    refused: tuple[int, ...]


ARCHES = {"x86_64": Arch(0xC000003E, 41, 53, 317,
                         (29, 30, 31, 68, 69, 70, 71, 64, 65, 220, 66, 240, 101, 310, 311, 438)),
          "aarch64": Arch(0xC00000B7, 198, 199, 277,
                          (194, 196, 195, 186, 189, 188, 187, 190, 193, 192, 191, 180, 117, 270,
                           271, 438))}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def native_arch() -> Arch | None:
    """This process's architecture, or None where the filter does not know it (then it is not
    installed): another machine, or a 32-bit Python whose calls are not the kernel's native."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    return ARCHES.get(os.uname().machine)


def program(arch: Arch) -> list[tuple[int, int, int, int]]:
    """The classic-BPF program, as ``(code, jump if true, jump if false, k)`` instructions."""
    refused = (arch.socket, _IO_URING_SETUP, *arch.refused)
    to_refuse = len(refused) + 4  # from the x32 test to the last refusal, over what follows it
    return [_LOAD_ARCH,
            (_JUMP_EQUAL, 1, 0, arch.audit),             # another architecture: refused
            _REFUSE,
            _LOAD_NR,
            (_JUMP_AT_LEAST, to_refuse, 0, _X32_BIT),    # x32's calls: refused
            *((_JUMP_EQUAL, to_refuse - 1 - i, 0, nr) for i, nr in enumerate(refused)),
            (_JUMP_EQUAL, 0, 4, arch.socketpair),        # any other call: allowed
            _LOAD_SOCKET_TYPE,                           # socketpair's type, less its flags
            _TYPE_LESS_FLAGS,
            (_JUMP_EQUAL, 1, 0, _SOCK_STREAM),
            _REFUSE,
            _ALLOW]


def forbid_new_sockets(libc: ctypes.CDLL) -> str:
    """Install the filter on every thread of this process (which has set ``no_new_privs``);
    returns :data:`DESCRIPTION`, or raises ``OSError`` saying why it could not."""
    arch = native_arch()
    if arch is None:
        raise OSError(errno.ENOTSUP, f"no seccomp filter for {os.uname().machine} here")
    instructions = program(arch)
    table = (_Instruction * len(instructions))(*(_Instruction(*i) for i in instructions))
    filter_program = _Program(len(instructions), table)
    if libc.syscall(arch.seccomp, _SET_MODE_FILTER, _FILTER_FLAG_TSYNC,
                    ctypes.byref(filter_program)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER)")
    return DESCRIPTION
