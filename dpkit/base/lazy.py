"""Names imported on first use: a module proxy for heavy libraries and PEP 562 package exports.

``torch = lazy_import("torch")`` at the top of a module lets it be imported (and its classes
built, e.g. a mechanism's ``guarantee(None)`` called by ``dpkit validate``) without importing
torch: the proxy imports torch on the first attribute access (``torch.zeros``) and forwards every
access after that. Modules whose top level *uses* torch (a decorator, a default argument) import
it there anyway; annotations are free under ``from __future__ import annotations``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module ``name`` and imports it on the first attribute access."""

    __slots__ = ("_lazy_name", "_lazy_module")
    _lazy_name: str
    _lazy_module: ModuleType | None

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_lazy_name", name)
        object.__setattr__(self, "_lazy_module", None)

    def _load(self) -> ModuleType:
        module = self._lazy_module
        if module is None:
            module = importlib.import_module(self._lazy_name)
            object.__setattr__(self, "_lazy_module", module)
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._load(), attr, value)

    def __dir__(self) -> list[str]:
        return dir(self._load())

    def __repr__(self) -> str:
        state = "imported" if self._lazy_module is not None else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for module ``name`` that imports it on first attribute access.

    Use it for heavy libraries a module needs only inside functions::

        if TYPE_CHECKING:
            import torch
        else:
            torch = dpkit.lazy_import("torch")
    """
    return LazyModule(name)


def export_lazily(package: str, homes: Mapping[str, str],
                  namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A PEP 562 ``__getattr__`` for ``package``: each public name in ``homes`` is imported from
    its home module on first use and then kept in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home.endswith(f".{name}") and not hasattr(module, name) else getattr(module, name)
        namespace[name] = value
        return value

    return __getattr__
