"""Shared fixtures: an isolated plug-in system with only the toy plug-in; the audit test mechanisms."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dpkit.contract.plugins


@pytest.fixture(autouse=True)
def private_budget_store(tmp_path_factory, monkeypatch):
    """Every test charges a budget store of its own, never the user's (``$DPKIT_BUDGET_STORE``)."""
    path = tmp_path_factory.mktemp("budget") / "store.sqlite"
    monkeypatch.setenv("DPKIT_BUDGET_STORE", str(path))
    return path


@pytest.fixture
def toy_plugins(monkeypatch):
    """Load only ``dpkit.testing.toy`` (no entry points), and restore the real plug-ins afterwards."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy")
    dpkit.contract.plugins.reset()
    yield dpkit.contract.plugins.get_registry()
    dpkit.contract.plugins.reset()


AUDIT_TEST_DIR = Path(__file__).parent / "audit"


@pytest.fixture(scope="module")
def audit_test_plugins():
    """Register ``tests/audit``'s reference and broken mechanisms for one test module."""
    if str(AUDIT_TEST_DIR) not in sys.path:
        sys.path.insert(0, str(AUDIT_TEST_DIR))
    import broken
    import reference

    system = dpkit.contract.plugins.get_plugin_system()
    added = []
    for name, module in (("audit_reference", reference), ("audit_broken", broken)):
        if name not in system.info:
            dpkit.contract.plugins.register_plugin(module, name)
            added.append(name)
    yield
    for name in added:
        system.remove(name)


@pytest.fixture
def toy_spec_text(tmp_path):
    """A spec over the toy plug-in with a 3-point η sweep, returned as (path, out_dir)."""
    out = tmp_path / "out"
    path = tmp_path / "toy.yaml"
    path.write_text(f"""
name: toy
data: {{name: toy_text, params: {{n_docs: 16}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, label: Toy, params: {{eta: 1.0}}, sweep: {{eta: [0.5, 2.0, 8.0]}}}}
attacks: [{{name: toy_attack}}]
seeds: [0]
device: cpu
report: {{x: eta, utility: preserved, privacy: toy_top1}}
output: {out}
""")
    return path, out
