"""Old import paths of modules that moved into layer folders, kept working for one release.

``import dpkit.context`` (and ``from dpkit.wire import Release`` …) still work: a meta-path
finder answers each old name with the module at its new path — the very same module object, so
``isinstance`` checks, monkeypatching and pickling behave as before — and warns once with a
:class:`DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "dpkit.errors": "dpkit.base.errors",
    "dpkit.jsonutil": "dpkit.base.jsonutil",
    "dpkit.cache": "dpkit.base.cache",
    "dpkit.space": "dpkit.text.space",
    "dpkit.search": "dpkit.text.search",
    "dpkit.noise": "dpkit.text.noise",
    "dpkit.training": "dpkit.ml.training",
    "dpkit.metrics": "dpkit.ml.metrics",
    "dpkit.wire": "dpkit.release.wire",
    "dpkit.token_releases": "dpkit.release.tokens",
    "dpkit.releases": "dpkit.contract.releases",
    "dpkit.kinds": "dpkit.contract.kinds",
    "dpkit.hookspecs": "dpkit.contract.hookspecs",
    "dpkit.protocols": "dpkit.contract.protocols",
    "dpkit.component": "dpkit.contract.component",
    "dpkit.params": "dpkit.contract.params",
    "dpkit.context": "dpkit.contract.context",
    "dpkit.registry": "dpkit.contract.registry",
    "dpkit.plugins": "dpkit.contract.plugins",
    "dpkit.plot": "dpkit.report.plot",
    "dpkit.accounting.planning": "dpkit.runner.plan",
    "dpkit.runner.cells": "dpkit.spec.cells",
}
"""Old module path -> new module path."""


class _Alias(importlib.abc.Loader):
    """Loads an old name by importing the new module and putting it in ``sys.modules``."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(f"{module.__name__} moved to {self.target}; import it from there (the old "
                      "path will be removed in the next release)", DeprecationWarning, stacklevel=2)
        # importlib returns whatever sys.modules holds under the old name after exec_module, so
        # the old name becomes the new module itself, with its own __spec__ untouched.
        sys.modules[module.__name__] = importlib.import_module(self.target)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths in :data:`MOVED` (and only those)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        """A spec whose loader aliases ``fullname`` to its new module, or None."""
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (called by ``dpkit/__init__.py``)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
