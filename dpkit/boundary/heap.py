"""A server process keeps the memory it frees, for its short life: glibc's allocator otherwise
hands freed blocks back to the kernel after each forward pass and faults fresh zeroed pages in
for the next one (≈ 10⁶ page faults and a second of system time in an SnD cell).

:func:`keep_freed_memory` is called by the fork server when it starts
(:mod:`dpkit.boundary.quiet_start`), so every server forked from it allocates from a heap that
only grows; the client's allocator is left as it is. It is a speed setting, with no bearing on
what a server can read.
"""

from __future__ import annotations

from dpkit.boundary.confine import _libc

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

SETTINGS = ((M_TRIM_THRESHOLD, 1 << 30), (M_MMAP_THRESHOLD, 32 << 20), (M_TOP_PAD, 64 << 20))
"""Freed memory goes back to the kernel only past 1 GiB at the heap's top; blocks under 32 MiB
(glibc's largest threshold) come from the heap, not from a fresh mapping; the heap grows by
64 MiB at a time."""


def keep_freed_memory() -> bool:
    """Have this process's allocator keep what it frees (see the module docstring); False where
    the C library is not glibc."""
    mallopt = getattr(_libc(), "mallopt", None)  # the C library found once, for the rules too
    if mallopt is None:
        return False
    return all(mallopt(option, value) == 1 for option, value in SETTINGS)
