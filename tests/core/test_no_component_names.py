"""The framework asks for capabilities, never for a component by name: no name registered by a
built-in plug-in appears anywhere in dpkit/ (code, docstrings, templates), and the process-wide
registry is looked up only by the entry points (the command line, the plug-in system, the test
harness, a Ray worker)."""

from __future__ import annotations

import re
from pathlib import Path

from dpkit.contract.plugins import get_registry

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORK = ROOT / "dpkit"
SOURCES = sorted(p for p in FRAMEWORK.rglob("*") if p.is_file() and p.suffix in
                 (".py", ".txt", ".toml", ".md", ".yaml", ".tmpl"))
LOOKUP_ALLOWED = ("cli/", "contract/plugins.py", "testing/", "runner/ray_executor.py")


def built_in_names() -> dict[str, str]:
    """Every component (and audited defense) registered by a package under plugins/."""
    registry = get_registry()
    names = {}
    for entries in registry.entries.values():
        for name, entry in entries.items():
            package = entry.target.split(".")[0]
            if (ROOT / "plugins" / package).is_dir():
                names[name] = entry.plugin
    return names


def mentions(names, text: str) -> list[str]:
    return [n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]


def test_the_built_in_names_are_found():
    names = built_in_names()
    assert {"laplace_dx", "privatize_text", "local_files", "tiny-encoder", "snd"} <= set(names)
    assert len(names) >= 50


def test_no_built_in_component_name_appears_in_the_framework():
    names = built_in_names()
    found = [f"{p.relative_to(ROOT)}: {n}" for p in SOURCES
             for n in mentions(names, p.read_text(encoding="utf-8"))]
    assert not found, "the framework names plug-in components (ask for a capability):\n" + \
        "\n".join(found)


def test_the_check_sees_a_name_in_code_and_in_prose():
    names = {"laplace_dx": "baselines", "tiny-encoder": "models"}
    assert mentions(names, 'registry.get("mechanism", "laplace_dx")') == ["laplace_dx"]
    assert mentions(names, "(``laplace_dx``, dχ-STENCIL)") == ["laplace_dx"]
    assert mentions(names, 'SplitModel("tiny-encoder", ...)') == ["tiny-encoder"]
    assert mentions(names, "laplace_dx_v2 and tiny-encoder-2 are other names") == []


def test_the_global_registry_is_looked_up_only_by_entry_points():
    found = [str(p.relative_to(FRAMEWORK)) for p in SOURCES if p.suffix == ".py"
             and re.search(r"\bget_(registry|plugin_system)\(", p.read_text(encoding="utf-8"))
             and not str(p.relative_to(FRAMEWORK)).startswith(LOOKUP_ALLOWED)]
    assert not found, f"pass the registry explicitly instead of looking it up: {found}"
