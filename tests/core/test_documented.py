"""Everything public is documented: hooks, CLI commands, dpkit.accounting's functions, errors."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import dpkit.accounting
import dpkit.base.errors
from dpkit.contract import hookspecs
from dpkit.cli.main import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md",
                                                         *sorted((ROOT / "docs").rglob("*.md"))])


def _mentioned(name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", DOCS) is not None


@pytest.mark.parametrize("hook", sorted(hookspecs.ALL_HOOKS))
def test_every_hook_is_documented(hook):
    assert inspect.getdoc(getattr(hookspecs, hook)), f"hook {hook} has no docstring"
    assert _mentioned(hook), f"hook {hook} is not mentioned in README.md or docs/*.md"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_cli_command_is_documented(command):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sub.choices[command].format_help().strip()
    assert any(c.dest == command and c.help for c in sub._choices_actions), \
        f"dpkit {command} has no help line"
    assert _mentioned(f"dpkit {command}"), f"`dpkit {command}` is not in README.md or docs/*.md"


ACCOUNTING_FUNCTIONS = sorted(name for name in dpkit.accounting.__all__
                              if inspect.isfunction(getattr(dpkit.accounting, name)))


@pytest.mark.parametrize("name", ACCOUNTING_FUNCTIONS)
def test_every_public_accounting_function_is_documented(name):
    assert inspect.getdoc(getattr(dpkit.accounting, name)), f"{name} has no docstring"
    assert _mentioned(name), f"dpkit.accounting.{name} is not mentioned in docs/*.md"


def test_error_tree_in_errors_module_matches_the_classes():
    """The hierarchy drawn in dpkit/errors.py's docstring is the real one."""
    drawn: dict[str, str] = {}
    parents: list[str] = []
    for line in (dpkit.base.errors.__doc__ or "").splitlines():
        match = re.match(r"^(\s*(?:[│ ]   )*)(?:[├└]── )?(\w+Error)\s", line)
        if not match:
            continue
        depth = (len(match.group(1)) - 4) // 4 + 1 if "──" in line else 0
        parents[depth:] = [match.group(2)]
        if depth:
            drawn[match.group(2)] = parents[depth - 1]
    real = {name: cls.__bases__[0].__name__ for name, cls in vars(dpkit.base.errors).items()
            if inspect.isclass(cls) and issubclass(cls, dpkit.base.errors.DpkitError)
            and cls is not dpkit.base.errors.DpkitError}
    assert drawn == real
