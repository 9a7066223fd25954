"""A process forked by the fork server reports what it inherited (tests of
:mod:`dpkit.boundary.fork_server`): its environment's probe variables and which modules it has."""

from __future__ import annotations

import os
import sys
from typing import Any

PREFIX = "FORK_PROBE_"


def report(conn: Any, modules: list[str]) -> None:
    """Send the ``FORK_PROBE_*`` variables, the fork server's variables, and which of
    ``modules`` are imported already."""
    conn.send({"environ": {k: v for k, v in os.environ.items()
                           if k.startswith(PREFIX) or k.startswith("DPKIT_FORK_SERVER")
                           or k == "OPENBLAS_THREAD_TIMEOUT"},
               "imported": {m: m in sys.modules for m in modules}})
    conn.close()
