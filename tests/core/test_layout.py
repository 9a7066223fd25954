"""The folder layout is the architecture: the framework never imports a plug-in, and every
component, built-ins included, loads through an entry point that names a package under plugins/."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit.contract.plugins import PluginSystem

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the entry-point test gets an empty parameter set (skipped)
    tomllib = None

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = (tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["dpkit"]
                if tomllib else {})


def imported_packages(path: Path) -> set[str]:
    """Top-level package names a module imports (absolute imports only)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_no_framework_module_imports_a_plugin():
    offenders = {str(p.relative_to(ROOT)): sorted(n for n in imported_packages(p) if n.startswith("dpkit_"))
                 for p in (ROOT / "dpkit").rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}, offenders


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_every_entry_point_is_a_plugin_package_that_registers_components(name):
    module = ENTRY_POINTS[name]
    assert "." not in module and (ROOT / "plugins" / module / "__init__.py").is_file(), \
        f"entry point {name} = {module!r} should name a package under plugins/"
    system = PluginSystem()
    system.load_extra(f"{name}={module}")
    assert not system.info[name].errors, system.info[name].errors
    registered = [e.name for entries in system.registry.entries.values() for e in entries.values()
                  if e.plugin == name]
    assert registered, f"plug-in {name} ({module}) registers no component"


def test_testing_helpers_need_no_plugin():
    code = ("import sys, dpkit.testing, dpkit.contract.plugins\n"
            "reg = dpkit.contract.plugins.get_registry()\n"
            "assert reg.names('defense') and reg.names('dataset'), reg.entries\n"
            "print(sorted(m for m in sys.modules if m.startswith('dpkit_')))\n")
    env = {**os.environ, "DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr + done.stdout
