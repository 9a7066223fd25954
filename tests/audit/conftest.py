"""Registers the reference and broken test mechanisms as in-process plug-ins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import broken  # noqa: E402
import reference  # noqa: E402


def register_test_plugins() -> list[str]:
    """Add the reference and broken mechanisms to the process-wide registry; returns the names
    this call added."""
    from dpkit.plugins import get_plugin_system, register_plugin

    added = []
    for name, module in (("audit_reference", reference), ("audit_broken", broken)):
        if name not in get_plugin_system().info:
            register_plugin(module, name)
            added.append(name)
    return added


def unregister_test_plugins(names: list[str]) -> None:
    """Remove the test plug-ins again so other test directories see the real registry."""
    from dpkit.plugins import get_plugin_system

    for name in names:
        get_plugin_system().remove(name)


@pytest.fixture(scope="package", autouse=True)
def test_plugins():
    """The test mechanisms, registered while the tests of this directory run."""
    added = register_test_plugins()
    yield
    unregister_test_plugins(added)
