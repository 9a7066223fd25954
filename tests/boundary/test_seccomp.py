"""The seccomp filter that keeps a confined server from making sockets: its numbers are the
kernel's, its program decides as intended on each architecture it knows (run here by a small
interpreter of classic BPF; tests/boundary/test_confine.py runs it in the kernel), and where it
cannot be installed ``auto`` says so while ``require`` refuses."""

from __future__ import annotations

import errno
import os
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpkit.boundary import seccomp
from dpkit.boundary.confine import landlock_abi

HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}  # aarch64's are the generic ones
ELF_MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | errno.EACCES


def _defines(path: Path) -> dict[str, int]:
    text = path.read_text()
    return {name: int(value, 0) for name, value in
            re.findall(r"#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\b", text)}


@pytest.mark.skipif(not all(p.exists() for p in [*HEADERS.values(), Path("/usr/include/linux/audit.h")]),
                    reason="the kernel's headers (linux-libc-dev) are not installed")
@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_numbers_are_the_kernel_headers(machine):
    calls = _defines(HEADERS[machine])
    audit = _defines(Path("/usr/include/linux/audit.h"))
    elf = _defines(Path("/usr/include/linux/elf-em.h"))
    arch = seccomp.ARCHES[machine]
    assert arch.audit == (elf[ELF_MACHINES[machine]] | audit["__AUDIT_ARCH_64BIT"]
                          | audit["__AUDIT_ARCH_LE"])
    assert (arch.socket, arch.socketpair, arch.seccomp) == (
        calls["__NR_socket"], calls["__NR_socketpair"], calls["__NR_seccomp"])
    assert calls["__NR_io_uring_setup"] == 425
    assert arch.refused == tuple(calls[f"__NR_{name}"] for name in seccomp.REFUSED_CALLS)


def _decide(program: list[tuple[int, int, int, int]], arch: int, nr: int,
            args: tuple[int, ...] = ()) -> int:
    """Run ``program`` on a call as the kernel's classic-BPF interpreter would (the opcodes the
    filter uses: load a word, jump if equal or at least, and, return)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
    accumulator, at = 0, 0
    while True:
        code, jt, jf, k = program[at]
        at += 1
        if code == 0x20:
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:
            accumulator &= k
        elif code in (0x15, 0x35):
            taken = accumulator == k if code == 0x15 else accumulator >= k
            at += jt if taken else jf
        else:
            assert code == 0x06, code
            return k


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_program_refuses_new_sockets_and_other_architectures_only(machine):
    arch = seccomp.ARCHES[machine]
    other = next(a for m, a in seccomp.ARCHES.items() if m != machine)
    program = seccomp.program(arch)
    unix, inet, stream, datagram = socket.AF_UNIX, socket.AF_INET, socket.SOCK_STREAM, socket.SOCK_DGRAM
    flags = socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
    decisions = {
        "socket unix": (arch.socket, (unix, stream)), "socket udp": (arch.socket, (inet, datagram)),
        "io_uring_setup": (425, (4, 0)), "x32 socket": (arch.socket | 0x40000000, (unix, stream)),
        "datagram pair": (arch.socketpair, (unix, datagram)),
        "stream pair": (arch.socketpair, (unix, stream | flags)),
        "read": (0 if machine == "x86_64" else 63, (0, 0)), "seccomp": (arch.seccomp, (1, 1)),
        "mmap": (9 if machine == "x86_64" else 222, (0, 4096)),
        **{name: (nr, (0, 0)) for name, nr in zip(seccomp.REFUSED_CALLS, arch.refused)}}
    got = {name: _decide(program, arch.audit, nr, args) for name, (nr, args) in decisions.items()}
    allowed = {"stream pair", "read", "seccomp", "mmap"}
    assert got == {name: ALLOW if name in allowed else REFUSE for name in decisions}
    # another architecture's call, whatever its number (i386's socketcall is 102)
    assert {_decide(program, other.audit, nr) for nr in (0, 41, 102, 198)} == {REFUSE}
    assert _decide(program, 0x40000003, 102) == REFUSE  # i386


def test_an_unknown_machine_or_a_32_bit_python_gets_no_filter(monkeypatch):
    monkeypatch.setattr(seccomp.os, "uname", lambda: SimpleNamespace(machine="riscv64"))
    assert seccomp.native_arch() is None
    monkeypatch.setattr(seccomp.os, "uname", lambda: SimpleNamespace(machine="x86_64"))
    assert seccomp.native_arch() == seccomp.ARCHES["x86_64"]
    monkeypatch.setattr(seccomp.ctypes, "sizeof", lambda kind: 4)
    assert seccomp.native_arch() is None


_WITHOUT_FILTER = """
import os, socket, sys
from dpkit.boundary import seccomp
machine = os.uname().machine
if sys.argv[2] == "unknown machine":
    seccomp.ARCHES.clear()
else:  # a kernel without the seccomp call: ENOSYS
    seccomp.ARCHES[machine] = seccomp.ARCHES[machine]._replace(seccomp=100000)
from dpkit.boundary.confine import confine_server
try:
    how = confine_server(mode=sys.argv[1])
except RuntimeError as exc:
    print("refused:", exc)
else:
    socket.socket(socket.AF_UNIX).close()  # Landlock only: a socket is still made
    print(how)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or landlock_abi() == 0
                    or seccomp.native_arch() is None,
                    reason="server confinement needs Linux with Landlock, on x86_64 or aarch64")
@pytest.mark.parametrize("mode", ["auto", "require"])
@pytest.mark.parametrize("missing", ["unknown machine", "no seccomp call"])
def test_without_a_filter_auto_says_so_and_require_refuses(mode, missing):
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # a mutant's
    done = subprocess.run([sys.executable, "-c", _WITHOUT_FILTER, mode, missing],
                          capture_output=True, text=True, timeout=60, env=environ)
    assert done.returncode == 0, done.stderr
    why = (f"[Errno {errno.ENOTSUP}] no seccomp filter for {os.uname().machine} here"
           if missing == "unknown machine" else
           f"[Errno {errno.ENOSYS}] seccomp(SECCOMP_SET_MODE_FILTER)")
    if mode == "auto":
        assert done.stdout.strip() == f"landlock ABI {landlock_abi()}; no seccomp: {why}"
    else:
        assert done.stdout.strip() == (
            f"refused: no seccomp filter ({why}), and DPKIT_SERVER_CONFINE=require; use a Linux "
            "kernel with seccomp filters on x86_64 or aarch64, or set it to auto")
