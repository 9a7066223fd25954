"""The fork server's allocator keeps what its servers free (dpkit.boundary.heap)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

GLIBC = platform.libc_ver()[0] == "glibc"

PROBE = """
import sys
if sys.argv[1] == "quiet":
    import dpkit.boundary.quiet_start
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
before = resident()
block = bytearray(16 << 20)  # zero-filled: every page touched
held = resident()
del block
print((resident() - before) / (held - before))
"""


def kept_share(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True)
    return float(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_a_fork_server_keeps_freed_blocks_resident():
    assert kept_share("quiet") > 0.9


@pytest.mark.skipif(not GLIBC, reason="needs glibc's mallopt")
def test_without_it_a_freed_block_goes_back_to_the_kernel():
    assert kept_share("plain") < 0.1

