"""Name -> component registry, filled by plug-in hooks, with did-you-mean errors."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dpkit.base.errors import ComponentNotFoundError, ParamsError, PluginError
from dpkit.contract.kinds import BY_NAME, KINDS


@dataclass
class Entry:
    """One registered component and the plug-in that provided it."""

    kind: str
    name: str
    cls: Any
    plugin: str

    @property
    def summary(self) -> str:
        """First line of the component's docstring."""
        doc = inspect.getdoc(self.cls) or ""
        return doc.splitlines()[0] if doc else ""


@dataclass
class AuditEntry:
    """A canary-audit adapter for the defense named ``defense`` and the plug-in that provided it."""

    defense: str
    factory: Callable[[Any], Any]
    plugin: str


@dataclass
class Registry:
    """Components by kind and name, audit adapters by defense, and the errors met filling them."""

    entries: dict[str, dict[str, Entry]] = field(default_factory=lambda: {k: {} for k in KINDS})
    audits: dict[str, AuditEntry] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)
    """Plug-in name -> importable module, for building the same registry in a server process."""

    def add_audit(self, defense: str, factory: Callable[[Any], Any], plugin: str) -> None:
        """Register ``factory(defense_instance)`` as the canary audit of defense ``defense``."""
        if not isinstance(defense, str) or not defense.strip() or not callable(factory):
            raise PluginError(f"plug-in {plugin!r} registered an invalid defense audit: call "
                              "register(defense_name, factory) with a str and a callable, got "
                              f"{defense!r}, {factory!r}")
        existing = self.audits.get(defense)
        if existing is not None and existing.factory is not factory:
            raise PluginError(f"plug-in {plugin!r} registered an audit for defense {defense!r}, "
                              f"already provided by plug-in {existing.plugin!r}")
        self.audits[defense] = AuditEntry(defense, factory, plugin)

    def add(self, kind: str, cls: Any, plugin: str) -> None:
        """Validate and add ``cls`` as a ``kind`` component; raises PluginError if invalid."""
        problem = component_problem(kind, cls)
        if problem:
            raise PluginError(f"plug-in {plugin!r} registered an invalid {kind}: {problem}")
        existing = self.entries[kind].get(cls.name)
        if existing is not None and existing.cls is not cls:
            raise PluginError(
                f"plug-in {plugin!r} registered {kind} {cls.name!r}, already provided by plug-in "
                f"{existing.plugin!r}; rename one of them"
            )
        self.entries[kind][cls.name] = Entry(kind, cls.name, cls, plugin)

    def names(self, kind: str) -> list[str]:
        """Sorted names registered under ``kind``."""
        return sorted(self.entries[kind])

    def get(self, kind: str, name: str) -> Entry:
        """The entry for ``name``; raises ComponentNotFoundError with suggestions."""
        if kind not in self.entries:
            raise ValueError(f"unknown component kind {kind!r}; expected one of {', '.join(KINDS)}")
        try:
            return self.entries[kind][name]
        except KeyError:
            names = self.names(kind)
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
            raise ComponentNotFoundError(kind, name, close, names) from None

    def find(self, name: str, kinds: tuple[str, ...] = KINDS) -> Entry:
        """The entry named ``name`` in the first of ``kinds`` that has it."""
        for kind in kinds:
            if name in self.entries[kind]:
                return self.entries[kind][name]
        pool = sorted({n for k in kinds for n in self.entries[k]})
        close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5)
        raise ComponentNotFoundError("/".join(kinds), name, close, pool)

    def build(self, kind: str, name: str, params: dict | None = None):
        """Instantiate component ``name`` with validated ``params``."""
        entry = self.get(kind, name)
        return entry.cls(validate_params(entry.cls, params or {}))


def validate_params(cls: Any, params: dict | BaseModel) -> BaseModel:
    """Validate raw params against ``cls.Params``; raises ParamsError naming the field."""
    from pydantic import ValidationError

    if isinstance(params, cls.Params):
        return params
    try:
        return cls.Params.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ParamsError(f"{cls.name}.params.{loc}: {first['msg']}" if loc else
                          f"{cls.name}.params: {first['msg']}") from None


def component_problem(kind: str, cls: object) -> str | None:
    """Why ``cls`` is not a valid ``kind`` component, or None when it is."""
    if not inspect.isclass(cls):
        return f"expected a class, got {type(cls).__name__} {cls!r}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.strip():
        return f"{cls.__qualname__} has no string class attribute 'name'"
    params = getattr(cls, "Params", None)
    if not (inspect.isclass(params) and issubclass(params, BaseModel)):
        return f"{name}: class attribute 'Params' must be a pydantic BaseModel subclass"
    if params.model_config.get("extra") != "forbid":
        return f"{name}: Params must set extra='forbid' (subclass dpkit.Params)"
    for method in BY_NAME[kind].methods:
        if not callable(getattr(cls, method, None)):
            return f"{name}: a {kind} must define method {method}()"
    if kind == "mechanism" and getattr(cls, "domain", None) not in ("embedding", "token", "table"):
        return f"{name}: a mechanism must set domain to 'embedding', 'token' or 'table'"
    if kind == "attack" and not isinstance(getattr(cls, "requires", None), tuple):
        return f"{name}: an attack must set requires to a tuple of observed keys"
    return None
