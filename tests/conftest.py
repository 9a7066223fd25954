"""Shared fixtures: an isolated plug-in system with only the toy plug-in; the audit test mechanisms."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

import dpkit.contract.plugins

# `make test-smoke`: these paths, marked `smoke`, with few hypothesis examples (the "smoke"
# profile). The contract suites on toy components (and the example plug-in's), spec validation
# and the include rules, ledger properties.
SMOKE = ("tests/contract/", "tests/spec/", "tests/testing/test_toy.py",
         "tests/testing/test_contracts.py", "tests/evidence/test_specs.py",
         "tests/accounting/test_properties.py", "tests/accounting/test_ledger.py",
         "examples/dpkit-example-plugin/tests/")
settings.register_profile("smoke", max_examples=5, deadline=None)


def pytest_addoption(parser):
    parser.addoption("--smoke", action="store_true", help="collect only the smoke tier (the paths "
                     "in tests/conftest.py's SMOKE), so collection is quick too")


def pytest_ignore_collect(collection_path, config):
    """With ``--smoke``, skip every path that is not, or does not lead to, a :data:`SMOKE` path."""
    if not config.getoption("smoke"):
        return None
    try:
        where = Path(collection_path).resolve().relative_to(Path(config.rootpath)).as_posix()
    except ValueError:
        return True
    where += "/" if Path(collection_path).is_dir() else ""
    return None if any(p.startswith(where) or where.startswith(p) for p in SMOKE) else True


def pytest_collection_modifyitems(config, items):
    """Mark the tests under :data:`SMOKE` ``smoke`` (``pytest -m smoke``)."""
    root = Path(config.rootpath)
    missing = [p for p in SMOKE if not (root / p).exists()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py: the smoke tier names {', '.join(missing)}, "
                                "which does not exist; update SMOKE")
    for item in items:
        try:
            where = Path(str(item.fspath)).resolve().relative_to(root).as_posix()
        except ValueError:
            continue  # outside the project (e.g. an installed plug-in's tests)
        if where.startswith(SMOKE):
            item.add_marker(pytest.mark.smoke)


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
