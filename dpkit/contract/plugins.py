"""Plug-in manager: discovers plug-ins through the ``dpkit`` entry-point group.

``DPKIT_LOAD_PLUGINS=a,b`` loads only those entry points (by entry-point name; an empty value
loads none); ``DPKIT_DISABLED_PLUGINS=a,b`` skips those; ``DPKIT_EXTRA_PLUGINS=name=module,...``
also loads modules that are not installed as entry points (handy in tests and worker processes).

Hook implementations are found the way pytest finds them: only functions marked with
:data:`dpkit.hookimpl` count, and pluggy's ``check_pending`` rejects a marked function whose name is
no dpkit hook. A plug-in that fails to import, marks an unknown hook, raises inside a hook or
registers an invalid component is recorded under its name (see :func:`plugin_errors`), warned
about once per process, and the other plug-ins keep working.
"""

from __future__ import annotations

import difflib
import importlib.metadata as md
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from dpkit.contract import hookspecs
from dpkit.base.errors import DpkitError, PluginError
from dpkit.contract.registry import Registry

GROUP = "dpkit"


@dataclass
class PluginInfo:
    """A discovered plug-in: its name, distribution version and load error (if any)."""

    name: str
    module: str
    version: str | None = None
    distribution: str | None = None
    load_errors: list[str] = field(default_factory=list)
    build_errors: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Why the plug-in is broken: load errors, then errors of the latest registry build."""
        return [*self.load_errors, *self.build_errors]


class PluginSystem:
    """Owns the pluggy manager, the plug-in table and the registry built from the hooks."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}
        self._registry: Registry | None = None
        self._warned: set[tuple[str, str]] = set()

    def load_entry_points(self) -> None:
        """Import every enabled entry point of group ``dpkit``; failures are recorded."""
        for ep in enabled_entry_points():
            dist = getattr(ep, "dist", None)
            info = PluginInfo(ep.name, ep.value, dist.version if dist else None,
                              dist.metadata["Name"] if dist else None)
            self.info[ep.name] = info
            try:
                module = ep.load()
            except Exception as exc:  # a broken plug-in must not take the others down
                info.load_errors.append(f"import of {ep.value!r} failed: {type(exc).__name__}: {exc}")
                continue
            self.add(module, ep.name, info)
        self.load_extra(os.environ.get("DPKIT_EXTRA_PLUGINS", ""))

    def load_extra(self, spec: str) -> None:
        """Load ``name=module`` pairs (comma-separated) as plug-ins, e.g. in worker processes."""
        import importlib

        for item in filter(None, (p.strip() for p in spec.split(","))):
            name, _, module = item.partition("=")
            module = module or name
            info = PluginInfo(name, module)
            self.info[name] = info
            try:
                self.add(importlib.import_module(module), name, info)
            except Exception as exc:
                info.load_errors.append(f"import of {module!r} failed: {type(exc).__name__}: {exc}")

    def add(self, plugin: object, name: str, info: PluginInfo | None = None) -> None:
        """Register a plug-in object or module under ``name`` (also used for tests)."""
        info = info or PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))
        self.info[name] = info
        self._registry = None
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()  # a marked hook implementation no dpkit hook specifies
        except pluggy.PluginValidationError as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin, name=name)
            info.load_errors.append(_explain(exc))

    def remove(self, name: str) -> None:
        """Unregister plug-in ``name``."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin, name=name)
        self.info.pop(name, None)
        self._registry = None

    @property
    def registry(self) -> Registry:
        """The registry, built on first use by calling each plug-in's hooks separately."""
        if self._registry is None:
            self._registry = self._build_registry()
        return self._registry

    def _call_hook(self, hook_name: str, add: Callable[..., object]) -> None:
        """Call every implementation of ``hook_name`` with a ``register`` that passes its
        arguments and the plug-in's name to ``add``; errors are kept on the plug-in's info."""
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            info = self.info.setdefault(impl.plugin_name, PluginInfo(impl.plugin_name, "?"))

            def register(*args, _info=info, **kwargs):
                try:
                    add(*args, _info.name, **kwargs)
                except PluginError as exc:
                    _info.build_errors.append(str(exc))

            try:
                impl.function(register=register)
            except Exception as exc:
                info.build_errors.append(f"hook {hook_name} raised {type(exc).__name__}: {exc}")

    def _build_registry(self) -> Registry:
        registry = Registry()
        for info in self.info.values():
            info.build_errors = []
        for hook_name, kind in hookspecs.HOOKS.items():
            self._call_hook(hook_name, lambda component, plugin, _kind=kind, **how: registry.add(
                _kind, component, plugin, **how))
        self._call_hook(hookspecs.AUDIT_HOOK, registry.add_audit)
        registry.modules = {name: info.module for name, info in self.info.items()
                            if not info.load_errors and _importable(info.module)}
        for info in self.info.values():
            for err in info.errors:
                registry.errors.setdefault(info.name, []).append(err)
                if (info.name, err) not in self._warned:  # once per process, not per rebuild
                    self._warned.add((info.name, err))
                    warnings.warn(f"dpkit plug-in {info.name!r} is broken: {err}", stacklevel=2)
        return registry


def enabled_entry_points() -> list[md.EntryPoint]:
    """The ``dpkit`` entry points ``$DPKIT_LOAD_PLUGINS`` and ``$DPKIT_DISABLED_PLUGINS`` leave
    enabled, by name."""
    only = _env_names("DPKIT_LOAD_PLUGINS")
    disabled = _env_names("DPKIT_DISABLED_PLUGINS") or set()
    return [ep for ep in sorted(md.entry_points(group=GROUP), key=lambda e: e.name)
            if (only is None or ep.name in only) and ep.name not in disabled]


def plugin_modules() -> list[str]:
    """The modules loading the plug-ins imports (enabled entry points, then
    ``$DPKIT_EXTRA_PLUGINS``), found without importing any."""
    extra = filter(None, (p.strip() for p in os.environ.get("DPKIT_EXTRA_PLUGINS", "").split(",")))
    return list(dict.fromkeys([*(ep.module for ep in enabled_entry_points()),
                               *((item.partition("=")[2] or item) for item in extra)]))


def _importable(module: str) -> bool:
    """Whether ``module`` names a module a fresh process can import (not a plug-in object)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _env_names(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def _explain(exc: pluggy.PluginValidationError) -> str:
    """pluggy's validation error, with a did-you-mean for a misspelt hook name."""
    message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    known = list(hookspecs.ALL_HOOKS)
    for word in message.replace("'", " ").replace('"', " ").split():
        if word.startswith("dpkit_") and word not in known:
            close = difflib.get_close_matches(word, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"defines unknown hook {word!r}{hint}; known hooks: {', '.join(known)}"
    return f"invalid hook implementation: {message}"


_SYSTEM: PluginSystem | None = None


def get_plugin_system() -> PluginSystem:
    """The process-wide plug-in system, loading entry points on first call."""
    global _SYSTEM
    if _SYSTEM is None:
        _SYSTEM = PluginSystem()
        _SYSTEM.load_entry_points()
    return _SYSTEM


def get_registry() -> Registry:
    """The process-wide component registry."""
    return get_plugin_system().registry


def reset() -> None:
    """Forget the loaded plug-ins (the next call rediscovers entry points)."""
    global _SYSTEM
    _SYSTEM = None


def plugin_errors() -> dict[str, list[str]]:
    """Errors of broken plug-ins, by plug-in name."""
    return {n: list(i.errors) for n, i in get_plugin_system().info.items() if i.errors}


def register_plugin(plugin: ModuleType | object, name: str) -> None:
    """Register a plug-in object in this process (tests, notebooks)."""
    system = get_plugin_system()
    if name in system.info:
        raise DpkitError(f"a plug-in named {name!r} is already loaded; pick another name")
    system.add(plugin, name)


def load_dataset(name: str, params: dict | None = None) -> Any:
    """Load the registered dataset ``name`` with ``params`` (for scripts and notebooks)."""
    return get_registry().build("dataset", name, params or {}).load()


def load_model(name: str, params: dict | None = None, device: str = "auto") -> Any:
    """Load the registered model ``name`` onto ``device`` (``auto``: CUDA when available)."""
    from dpkit.contract.context import resolve_device

    return get_registry().build("model", name, params or {}).load(resolve_device(device))
