"""Name -> component registry, filled by plug-in hooks, with did-you-mean errors.

A component is registered as its class (``register(MyMechanism)``) or as a lazy reference
(``register("pkg.mechanisms:MyMechanism", name="my_mech", params="pkg.params:MyParams")``): then
only its ``Params`` model is imported while the registry is built, so a spec validates without
importing the component's heavy modules. The class is imported on first use, and a class whose
``name``, ``Params`` or declared capabilities differ from its registration is a
:class:`PluginError` naming the plug-in.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dpkit.base.errors import ComponentNotFoundError, ParamsError, PluginError
from dpkit.contract.kinds import BY_NAME, DECLARED_CAPABILITIES, KINDS, declared_capabilities


def resolve_reference(ref: str) -> Any:
    """The object a ``"package.module:Attribute"`` reference names (imports the module)."""
    module, _, attribute = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """One registered component: its kind, name, ``Params`` model, capabilities and plug-in.

    ``cls`` is the component class, imported on first access when it was registered by
    reference (``target``).
    """

    kind: str
    name: str
    params: type[BaseModel]
    plugin: str
    target: str
    capabilities: frozenset[str] = frozenset()
    _cls: Any = field(default=None, repr=False)

    @property
    def loaded(self) -> bool:
        """Whether the component class is imported."""
        return self._cls is not None

    @property
    def cls(self) -> Any:
        """The component class (imported and checked against its registration on first use)."""
        if self._cls is None:
            try:
                cls = resolve_reference(self.target)
            except Exception as exc:
                raise PluginError(f"plug-in {self.plugin!r} registered {self.kind} {self.name!r} as "
                                  f"{self.target!r}, which cannot be imported: "
                                  f"{type(exc).__name__}: {exc}") from exc
            problem = registration_mismatch(self, cls)
            if problem:
                raise PluginError(f"plug-in {self.plugin!r} registered {self.kind} {self.name!r} "
                                  f"as {self.target!r}, but {problem}")
            self._cls = cls
        return self._cls

    @property
    def summary(self) -> str:
        """First line of the component's docstring."""
        doc = inspect.getdoc(self.cls) or ""
        return doc.splitlines()[0] if doc else ""


def _same_component(a: Entry, b: Entry) -> bool:
    """Whether two registrations name one component (a plug-in registering it twice)."""
    if a._cls is not None and b._cls is not None:
        return a._cls is b._cls
    return a.target == b.target and a.params is b.params


def registration_mismatch(entry: Entry, cls: Any) -> str | None:
    """How an imported class differs from its lazy registration, or None."""
    problem = component_problem(entry.kind, cls)
    if problem:
        return problem
    if cls.name != entry.name:
        return f"the class's name is {cls.name!r}"
    if cls.Params is not entry.params:
        return (f"its Params is {cls.Params.__module__}.{cls.Params.__qualname__}, not the "
                f"registered {entry.params.__module__}.{entry.params.__qualname__}")
    declared = declared_capabilities(cls)
    if declared != entry.capabilities:
        return (f"it implements capabilities {sorted(declared) or 'none'} of "
                f"{list(DECLARED_CAPABILITIES)} while its registration declares "
                f"{sorted(entry.capabilities) or 'none'}")
    return None


@dataclass
class AuditEntry:
    """A canary-audit adapter for the defense named ``defense`` and the plug-in that provided it.

    ``factory`` is a callable, or a ``"module:Adapter"`` reference imported on first use.
    """

    defense: str
    target: Callable[[Any], Any] | str
    plugin: str

    @property
    def factory(self) -> Callable[[Any], Any]:
        """The adapter factory, ``factory(defense_instance)`` (imported on first use)."""
        if isinstance(self.target, str):
            try:
                self.target = resolve_reference(self.target)
            except Exception as exc:
                raise PluginError(f"plug-in {self.plugin!r} registered the audit of defense "
                                  f"{self.defense!r} as {self.target!r}, which cannot be "
                                  f"imported: {type(exc).__name__}: {exc}") from exc
            if not callable(self.target):
                raise PluginError(f"plug-in {self.plugin!r} registered the audit of defense "
                                  f"{self.defense!r} as {self.target!r}, which is not callable")
        return self.target


@dataclass
class Registry:
    """Components by kind and name, audit adapters by defense, and the errors met filling them."""

    entries: dict[str, dict[str, Entry]] = field(default_factory=lambda: {k: {} for k in KINDS})
    audits: dict[str, AuditEntry] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)
    """Plug-in name -> importable module, for building the same registry in a server process."""

    def add_audit(self, defense: str, factory: Callable[[Any], Any] | str, plugin: str) -> None:
        """Register ``factory(defense_instance)`` (a callable or a ``"module:Adapter"``
        reference) as the canary audit of defense ``defense``."""
        valid = callable(factory) or (isinstance(factory, str) and ":" in factory)
        if not isinstance(defense, str) or not defense.strip() or not valid:
            raise PluginError(f"plug-in {plugin!r} registered an invalid defense audit: call "
                              "register(defense_name, factory) with a str and a callable (or a "
                              f"'module:Adapter' reference), got {defense!r}, {factory!r}")
        existing = self.audits.get(defense)
        if existing is not None and existing.target != factory:
            raise PluginError(f"plug-in {plugin!r} registered an audit for defense {defense!r}, "
                              f"already provided by plug-in {existing.plugin!r}")
        self.audits[defense] = AuditEntry(defense, factory, plugin)

    def add(self, kind: str, component: Any, plugin: str, *, name: str | None = None,
            params: Any = None, capabilities: Iterable[str] = ()) -> Entry:
        """Validate and add a ``kind`` component: a class, or a ``"module:Class"`` reference with
        its ``name`` and ``params`` (a Params class or reference); raises PluginError if invalid."""
        entry = (self._class_entry(kind, component, plugin, name, params, capabilities)
                 if not isinstance(component, str) else
                 self._lazy_entry(kind, component, plugin, name, params, capabilities))
        existing = self.entries[kind].get(entry.name)
        if existing is not None and not _same_component(existing, entry):
            raise PluginError(
                f"plug-in {plugin!r} registered {kind} {entry.name!r}, already provided by plug-in "
                f"{existing.plugin!r}; rename one of them"
            )
        self.entries[kind][entry.name] = entry
        return entry

    @staticmethod
    def _class_entry(kind: str, cls: Any, plugin: str, name: Any, params: Any,
                     capabilities: Iterable[str]) -> Entry:
        problem = component_problem(kind, cls)
        if not problem and (name is not None or params is not None or tuple(capabilities)):
            problem = (f"{cls.name}: name, params and capabilities are for a lazy registration "
                       "by reference; a class states them itself")
        if problem:
            raise PluginError(f"plug-in {plugin!r} registered an invalid {kind}: {problem}")
        return Entry(kind, cls.name, cls.Params, plugin, f"{cls.__module__}:{cls.__qualname__}",
                     declared_capabilities(cls), cls)

    @staticmethod
    def _lazy_entry(kind: str, target: str, plugin: str, name: Any, params: Any,
                    capabilities: Iterable[str]) -> Entry:
        def invalid(why: str) -> PluginError:
            return PluginError(f"plug-in {plugin!r} registered an invalid {kind} {target!r}: {why}")

        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise invalid("a reference is 'package.module:ClassName'")
        if not isinstance(name, str) or not name.strip():
            raise invalid("a reference needs name='the component name'")
        if isinstance(params, str):
            try:
                params = resolve_reference(params)
            except Exception as exc:
                raise invalid(f"params {params!r} cannot be imported: {type(exc).__name__}: "
                              f"{exc}") from exc
        problem = params_problem(name, params)
        if problem:
            raise invalid(problem)
        wanted = frozenset(capabilities)
        unknown = sorted(wanted - set(DECLARED_CAPABILITIES))
        if unknown:
            raise invalid(f"unknown capabilities {unknown}; a registration declares only "
                          f"{list(DECLARED_CAPABILITIES)} (the others are found on the class)")
        return Entry(kind, name, params, plugin, target, wanted)

    def providers(self, kind: str, capability: str) -> list[Entry]:
        """Entries of ``kind`` that implement ``capability`` (one of DECLARED_CAPABILITIES)."""
        if capability not in DECLARED_CAPABILITIES:
            raise ValueError(f"capability {capability!r} is not known before import; known: "
                             f"{list(DECLARED_CAPABILITIES)} (check the others with isinstance "
                             "on an instance)")
        return [e for _, e in sorted(self.entries[kind].items()) if capability in e.capabilities]

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

    def build(self, kind: str, name: str, params: dict | BaseModel | None = None) -> Any:
        """Instantiate component ``name`` with validated ``params``."""
        entry = self.get(kind, name)
        validated = validate_params(entry, params or {})
        return entry.cls(validated)


def validate_params(component: Any, params: dict | BaseModel) -> BaseModel:
    """Validate raw params against a component's (an Entry's or a class's) ``Params``; raises
    ParamsError naming the field."""
    from pydantic import ValidationError

    model = component.params if isinstance(component, Entry) else component.Params
    if isinstance(params, model):
        return params
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ParamsError(f"{component.name}.params.{loc}: {first['msg']}" if loc else
                          f"{component.name}.params: {first['msg']}") from None


def params_problem(name: str, params: Any) -> str | None:
    """Why ``params`` is not a valid Params model of component ``name``, or None."""
    if not (inspect.isclass(params) and issubclass(params, BaseModel)):
        return f"{name}: class attribute 'Params' must be a pydantic BaseModel subclass"
    if params.model_config.get("extra") != "forbid":
        return f"{name}: Params must set extra='forbid' (subclass dpkit.Params)"
    return None


def component_problem(kind: str, cls: object) -> str | None:
    """Why ``cls`` is not a valid ``kind`` component, or None when it is."""
    if not inspect.isclass(cls):
        return f"expected a class, got {type(cls).__name__} {cls!r}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.strip():
        return f"{cls.__qualname__} has no string class attribute 'name'"
    problem = params_problem(name, getattr(cls, "Params", None))
    if problem:
        return problem
    for method in BY_NAME[kind].methods:
        if not callable(getattr(cls, method, None)):
            return f"{name}: a {kind} must define method {method}()"
    if kind == "mechanism" and getattr(cls, "domain", None) not in ("embedding", "token", "table"):
        return f"{name}: a mechanism must set domain to 'embedding', 'token' or 'table'"
    if kind == "attack" and not isinstance(getattr(cls, "requires", None), tuple):
        return f"{name}: an attack must set requires to a tuple of observed keys"
    return None
