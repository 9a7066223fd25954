"""The boundary tests' registry: the toy plug-in and the adversaries, nothing else."""

from __future__ import annotations

import pytest

import dpkit.contract.plugins


@pytest.fixture
def toy_registry(toy_plugins, monkeypatch):
    """``toy_plugins`` (restored afterwards) with ``dpkit.testing.adversaries`` too."""
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries")
    dpkit.contract.plugins.reset()
    return dpkit.contract.plugins.get_registry()


@pytest.fixture
def leak_plugins(monkeypatch):
    """The toy plug-in and the adversaries, nothing else."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS",
                       "toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries")
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    dpkit.contract.plugins.reset()
    yield
    dpkit.contract.plugins.reset()
