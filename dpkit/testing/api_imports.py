"""The plug-in boundary, checked from source: a plug-in imports only ``dpkit`` and ``dpkit.testing``.

Allowed: ``import dpkit`` (also ``as`` an alias), ``import dpkit.testing``, ``from dpkit import X``
and ``from dpkit.testing import X`` with X in that package's ``__all__``, and attributes
``dpkit.X`` / ``dpkit.testing.X`` of the same names — all at module level (or under a module-level
``if TYPE_CHECKING:``). Everything else is reported: an internal module (``dpkit.accounting``),
an attribute chain into one (``dpkit.accounting.Ledger``), a name outside ``__all__``, an import
inside a function, a string naming an internal module (``importlib.import_module("dpkit.x")``),
and any import of, or ``"module:Attr"`` reference into, another plug-in's package.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

_REFERENCE = re.compile(r"^([A-Za-z_]\w*)(\.\w+)*(:[A-Za-z_][\w.]*)?$")


def _public(package: str) -> set[str]:
    import importlib

    return set(importlib.import_module(package).__all__)


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, own: str, others: set[str]) -> None:
        self.path, self.own, self.others = path, own, others
        self.api, self.testing = _public("dpkit"), _public("dpkit.testing")
        self.aliases: dict[str, str] = {}  # local name -> "dpkit" or "dpkit.testing"
        self.depth = 0
        self.found: list[str] = []

    def report(self, node: ast.AST, message: str) -> None:
        self.found.append(f"{self.path}:{getattr(node, 'lineno', 0)}: {message}")

    def nested(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = nested

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        if checking and self.depth == 0:
            self.generic_visit(node)
        else:
            self.nested(node)

    def _package(self, module: str, node: ast.AST) -> None:
        top = module.split(".")[0]
        if top in self.others:
            self.report(node, f"imports another plug-in's package {module!r}: ask the registry "
                        "(ctx.build(kind, name, params)) or use the public API")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._package(alias.name, node)
            if alias.name.split(".")[0] != "dpkit":
                continue
            if alias.name not in ("dpkit", "dpkit.testing"):
                self.report(node, f"import {alias.name}: internal module; import from dpkit")
            elif self.depth:
                self.report(node, f"import {alias.name} inside a function or class: import it "
                            "at module level")
            elif alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases["dpkit"] = "dpkit"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            return
        self._package(module, node)
        if module.split(".")[0] != "dpkit":
            return
        if module not in ("dpkit", "dpkit.testing"):
            self.report(node, f"from {module} import ...: internal module; import the names from "
                        "dpkit (or dpkit.testing)")
            return
        public = self.api | {"testing"} if module == "dpkit" else self.testing
        for alias in node.names:
            if alias.name not in public:
                self.report(node, f"from {module} import {alias.name}: not in {module}.__all__")
            elif module == "dpkit" and alias.name == "testing":
                self.aliases[alias.asname or "testing"] = "dpkit.testing"
        if self.depth:
            self.report(node, f"from {module} import ... inside a function or class: import at "
                        "module level (or use dpkit.X there)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: list[str] = []
        value: ast.expr = node
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in self.aliases:
            chain.reverse()
            package = self.aliases[value.id]
            if package == "dpkit" and chain[0] == "testing":
                package, chain = "dpkit.testing", chain[1:]
            public = self.api if package == "dpkit" else self.testing
            if chain and chain[0] not in public:
                self.report(node, f"{package}.{'.'.join(chain)}: {chain[0]!r} is not in "
                            f"{package}.__all__")
            return  # the chain is checked whole; its inner attributes are not separate uses
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        text = node.value
        if not isinstance(text, str):
            return
        match = _REFERENCE.match(text)
        if not match:
            return
        top = match.group(1)
        dotted = "." in text or ":" in text
        if top == "dpkit" and dotted and text.split(":")[0] not in ("dpkit", "dpkit.testing"):
            self.report(node, f"string {text!r} names an internal dpkit module")
        elif top in self.others and dotted:
            self.report(node, f"string {text!r} references another plug-in's package")


def api_violations(files: Iterable[Path], own: str, others: Iterable[str]) -> list[str]:
    """Every use of dpkit beyond its published API, and of another plug-in, in ``files`` (the
    modules of plug-in package ``own``; ``others``: the other plug-ins' top-level packages)."""
    found: list[str] = []
    for path in files:
        checker = _Checker(str(path), own, set(others) - {own})
        checker.visit(ast.parse(Path(path).read_text(encoding="utf-8"), str(path)))
        found.extend(checker.found)
    return found
