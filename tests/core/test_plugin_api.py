"""One door for plug-ins: every built-in plug-in and the example import only the published API
(``dpkit`` and ``dpkit.testing``), and none imports — or names by ``"module:Attr"`` — another."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dpkit
import dpkit.testing
from dpkit.testing import api_violations

ROOT = Path(__file__).resolve().parents[2]


def packages() -> dict[str, list[Path]]:
    """Each plug-in package (plugins/ and examples/) -> its modules (an example's tests too)."""
    found: dict[str, list[Path]] = {}
    for init in sorted([*ROOT.glob("plugins/*/__init__.py"), *ROOT.glob("examples/*/*/__init__.py")]):
        package = init.parent
        files = sorted(package.rglob("*.py"))
        if package.parent.parent.name == "examples":
            files += sorted((package.parent / "tests").rglob("*.py"))
        found[package.name] = files
    return found


PACKAGES = packages()


def test_the_plugins_are_found():
    assert {"dpkit_baselines", "dpkit_snd", "dpkit_tasks", "dpkit_example"} <= set(PACKAGES)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_plugin_imports_only_the_published_api(package):
    found = api_violations(PACKAGES[package], package, PACKAGES)
    assert not found, "\n".join(found)


def check(source: str, tmp_path: Path, own: str = "dpkit_mine") -> list[str]:
    path = tmp_path / "module.py"
    path.write_text(source)
    return api_violations([path], own, {own, "dpkit_other"})


@pytest.mark.parametrize("source", [
    "import dpkit\nfrom dpkit import Params, RunContext\nfrom dpkit.testing import PlantedBug\n"
    "x = dpkit.Release.uncovered\ny = dpkit.testing.MechanismContract\n",
    "import dpkit.testing\nz = dpkit.testing.dx_sampler_bugs\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dpkit import Registry\n",
    "import dpkit_mine.sub\nfrom dpkit_mine import x\nREF = 'dpkit_mine.params:P'\n",
])
def test_the_published_api_passes(source, tmp_path):
    assert check(source, tmp_path) == []


@pytest.mark.parametrize("source, said", [
    ("import dpkit.accounting\n", "internal module"),
    ("from dpkit.accounting import Ledger\n", "internal module"),
    ("import dpkit\nL = dpkit.accounting.Ledger\n", "'accounting' is not in dpkit.__all__"),
    ("import dpkit as dk\nL = dk.base.errors.AuditError\n", "'base' is not in dpkit.__all__"),
    ("import dpkit\nt = dpkit.testing.battery.Check\n", "'battery' is not in dpkit.testing.__all__"),
    ("from dpkit import get_registry\n", "not in dpkit.__all__"),
    ("def f():\n    from dpkit import Params\n", "inside a function"),
    ("class C:\n    import dpkit\n", "inside a function or class"),
    ("import importlib\nm = importlib.import_module('dpkit.contract.plugins')\n",
     "names an internal dpkit module"),
    ("from dpkit_other.laplace import NoNoise\n", "another plug-in's package"),
    ("import dpkit_other\n", "another plug-in's package"),
    ("SAMPLER = 'dpkit_other.laplace'\n", "references another plug-in's package"),
    ("REF = 'dpkit_other.defenses:SnD'\n", "references another plug-in's package"),
])
def test_every_way_past_the_door_is_reported(source, said, tmp_path):
    found = check(source, tmp_path)
    assert len(found) == 1 and said in found[0], found


@pytest.mark.parametrize("module", ["dpkit/__init__.py", "dpkit/testing/__init__.py"])
def test_the_type_checking_imports_are_the_published_names(module):
    """What mypy and IDEs see (the TYPE_CHECKING imports) is exactly what loads at run time."""
    import ast

    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {(node.module, a.name) if a.name == a.asname else ("?", a.name)
             for node in block.body for a in node.names}
    homes = ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.AnnAssign)
                                  and getattr(n.target, "id", "") == "_HOMES"))
    # a submodule exported by name is imported from its parent package
    expected = {(home.removesuffix(f".{name}"), name) if home.endswith(f".{name}") else
                (home, name) for name, home in homes.items()}
    assert {name for _, name in typed} == set(homes)
    assert typed == expected


def test_the_api_names_resolve_and_are_documented():
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for package in (dpkit, dpkit.testing):
        for name in package.__all__:
            value = getattr(package, name)
            assert value is not None, f"{package.__name__}.{name}"
            assert f"`{name}`" in docs, f"{package.__name__}.{name} is not listed in docs/plugins.md"


def test_import_dpkit_imports_no_heavy_library_and_no_plugin():
    code = ("import sys, dpkit, dpkit.testing\n"
            "heavy = [m for m in ('torch', 'dp_accounting', 'scipy', 'sklearn', 'numpy', 'pandas')"
            " if m in sys.modules]\n"
            "plugins = [m for m in sys.modules if m.startswith('dpkit_')]\n"
            "print(heavy, plugins)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] []"


def test_every_published_class_function_and_module_has_a_docstring():
    import inspect

    missing = [f"{package.__name__}.{name}" for package in (dpkit, dpkit.testing)
               for name in package.__all__
               if (inspect.isclass(value := getattr(package, name)) or inspect.isfunction(value)
                   or inspect.ismodule(value)) and not (value.__doc__ or "").strip()]
    assert not missing, f"published without a docstring: {missing}"
