"""Second validation pass of a spec: every component and every expanded cell against a registry.

One pass, before anything runs: the spec as written (each base param, even one a sweep
overrides), then every cell the sweeps expand to (components, params and evaluation settings of
each). Every problem is a :class:`SpecError` ``FILE: location — message``.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Collection

from pydantic import ValidationError

from dpkit.base.errors import ComponentNotFoundError, DpkitError, SpecError
from dpkit.contract.registry import Entry, Registry
from dpkit.contract.tasks import mechanism_task, mechanism_task_params
from dpkit.spec.cells import Cell, SweepError, expand
from dpkit.spec.guarantees import check_guarantees
from dpkit.spec.schema import Spec


def check_spec(spec: Spec, registry: Registry) -> list[Cell]:
    """Validate ``spec`` and every cell it expands to; returns the cells (raises SpecError).

    A spec checked once against a registry is not checked again (loading a spec checks it, and
    the runner asks for its cells).
    """
    content = spec.model_dump_json()
    if spec._checked is not None and spec._checked[0] is registry and spec._checked[1] == content:
        return list(spec._checked[2])
    path = spec.path
    for gpath in spec.sweep:
        if gpath.split(".")[0] not in Spec.model_fields:
            raise SpecError(path, f"sweep.{gpath}", f"unknown spec field {gpath.split('.')[0]!r}")
    for kind, location, ref, own_sweep in _components_as_written(spec):
        entry = _lookup(registry, path, kind, f"{location}.name", ref.name)
        supplied = {p.split(".")[0] for p in own_sweep} | {
            g[len(location) + 8:].split(".")[0] for g in spec.sweep
            if g.startswith(f"{location}.params.")}
        _validate(entry, ref.params, path, location, {}, supplied)
    try:
        cells = expand(spec, registry)
    except SweepError as exc:
        raise SpecError(path, exc.location, exc.message) from None
    seen: set[str] = set()
    for cell in cells:
        for kind, location, name, params, swept in _cell_components(spec, cell):
            key = json.dumps([kind, location, name, params], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            where = next((s for p, s in swept.items() if p == "name"), f"{location}.name")
            entry = _lookup(registry, path, kind, where, name)
            _validate(entry, params, path, location, swept)
        if cell.kind == "mechanism":
            key = json.dumps(["evaluation", cell.component, cell.evaluation, cell.params],
                             sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                _check_evaluation(registry, path, cell)
    from dpkit.evidence.check import check_claims

    check_claims(spec, cells)
    check_guarantees(spec, cells, registry)
    spec._checked = (registry, content, cells)
    return list(cells)


def _components_as_written(spec: Spec):
    """(kinds, location, ref, own sweep) of every component named in the spec."""
    yield ("dataset",), "data", spec.data, {}
    if spec.model:
        yield ("model",), "model", spec.model, {}
    for i, attack in enumerate(spec.attacks):
        yield ("attack",), f"attacks.{i}", attack, {}
    for location, entry in spec.methods():
        kinds = (entry.kind,) if entry.kind else (
            (location,) if location in ("defense", "mechanism") else ("defense", "mechanism"))
        yield kinds, location, entry, entry.sweep


def _cell_components(spec: Spec, cell):
    """(kinds, location, name, params, swept) for each component a cell builds.

    ``swept`` maps a param path (relative to the component's params; ``name`` for the component
    name) to the sweep entry that set it, e.g. ``sweep.data.params.n_docs=4``.
    """
    globals_ = {p: v for p, v in cell.point.items() if p in spec.sweep}
    own = {p: v for p, v in cell.point.items() if p not in spec.sweep}

    def swept(location: str, method_sweep: bool = False) -> dict[str, str]:
        out = {}
        for gpath, value in globals_.items():
            if gpath.startswith(f"{location}.params."):
                out[gpath[len(location) + 8:]] = f"sweep.{gpath}={value!r}"
            elif gpath == f"{location}.name":
                out["name"] = f"sweep.{gpath}={value!r}"
        if method_sweep:
            out.update({p: f"{location}.sweep.{p}={v!r}" for p, v in own.items()})
        return out

    yield ("dataset",), "data", cell.data["name"], cell.data["params"], swept("data")
    if cell.model:
        yield ("model",), "model", cell.model["name"], cell.model["params"], swept("model")
    for i, attack in enumerate(cell.attacks):
        yield ("attack",), f"attacks.{i}", attack["name"], attack["params"], swept(f"attacks.{i}")
    location = next(loc for loc, entry in spec.methods() if entry.display == cell.method)
    yield (cell.kind,), location, cell.component, cell.params, swept(location, True)


def _check_evaluation(registry: Registry, path: str, cell: Cell) -> None:
    try:
        task = mechanism_task(registry)
    except DpkitError as exc:
        raise SpecError(path, "mechanism", str(exc)) from None
    try:
        task.params.model_validate(mechanism_task_params(cell.component, cell.params,
                                                         cell.evaluation))
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            known = [k for k in task.params.model_fields if k not in ("mechanism", "mechanism_params")]
            msg = f"unknown evaluation setting {err['loc'][-1]!r}; {_hint(err['loc'][-1], known)}"
        raise SpecError(path, "evaluation." + ".".join(str(p) for p in err["loc"]),
                        msg) from None


def _lookup(registry: Registry, path: str, kinds: tuple[str, ...], location: str,
            name: str) -> Entry:
    try:
        return registry.find(name, kinds)
    except ComponentNotFoundError as exc:
        raise SpecError(path, location, str(exc)) from None


def _validate(entry: Entry, params: dict, path: str, location: str, swept: dict[str, str],
              supplied: Collection[str] = ()) -> None:
    """Validate ``params``; ``supplied``: top-level fields a sweep sets (may be missing here)."""
    try:
        entry.params.model_validate(params)
    except ValidationError as exc:
        errors = [e for e in exc.errors()
                  if not (e["type"] == "missing" and str(e["loc"][0]) in supplied)]
        if errors:
            err = errors[0]
            if not err["loc"]:  # a check across fields: name the field whose value it names
                err = {**err, "loc": _named_field(params, err["msg"])}
            raise SpecError(path, *_describe(entry, err, location, swept)) from None


def _named_field(params: dict, message: str) -> tuple[str, ...]:
    """The param whose value a whole-model error message quotes (e.g. a missing file's path)."""
    named = [k for k, v in params.items() if isinstance(v, str) and len(v) > 2 and v in message]
    return (max(named, key=lambda k: len(str(params[k]))),) if named else ()


def _hint(name: Any, known: list[str]) -> str:
    """``did you mean 'x'?`` for the closest known name, else the known names."""
    close = difflib.get_close_matches(str(name), known, n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known) or 'none'}"


def _describe(entry: Entry, err: Any, location: str, swept: dict[str, str]) -> tuple[str, str]:
    field = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown parameter {err['loc'][-1]!r} of {entry.name!r}; " + \
            _hint(err["loc"][-1], list(entry.params.model_fields))
    by = next((s for p, s in swept.items()
               if p == field or field.startswith(p + ".") or p.startswith(field + ".")), None)
    where = f"{location}.params.{field}" if field else f"{location}.params"
    return by or where, msg.removeprefix("Value error, ")
