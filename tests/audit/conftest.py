"""Registers the reference and broken test mechanisms as in-process plug-ins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import broken  # noqa: E402
import reference  # noqa: E402


def register_test_plugins() -> None:
    """Add the reference and broken mechanisms to the process-wide registry (once)."""
    from dpkit.plugins import get_plugin_system, register_plugin

    for name, module in (("audit_reference", reference), ("audit_broken", broken)):
        if name not in get_plugin_system().info:
            register_plugin(module, name)


@pytest.fixture(scope="session", autouse=True)
def test_plugins():
    """The test mechanisms, registered for the whole session."""
    register_test_plugins()
