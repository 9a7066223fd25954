"""Second validation pass of a spec: component names and params against the registry."""

from __future__ import annotations

import difflib

from pydantic import ValidationError

from dpkit.errors import ComponentNotFoundError, SpecError
from dpkit.spec import Spec

MECHANISM_TASK = "privatize_text"


def check_components(spec: Spec, registry=None) -> None:
    """Raise SpecError for the first unknown component or invalid params (any sweep point)."""
    from dpkit.plugins import get_registry
    from dpkit.runner.cells import expand, grid

    registry = registry or get_registry()
    path = spec.path
    _check_ref(registry, path, "dataset", "data", spec.data.name, spec.data.params)
    if spec.model:
        _check_ref(registry, path, "model", "model", spec.model.name, spec.model.params)
    for i, attack in enumerate(spec.attacks):
        _check_ref(registry, path, "attack", f"attacks.{i}", attack.name, attack.params)
    for location, entry in spec.methods():
        kinds = (entry.kind,) if entry.kind else (
            (location,) if location in ("defense", "mechanism") else ("defense", "mechanism"))
        cls = _lookup(registry, path, kinds, f"{location}.name", entry.name)
        for point in grid(entry.sweep):
            params = dict(entry.params)
            from dpkit.runner.cells import set_path

            for key, value in point.items():
                set_path(params, key, value)
            _validate(cls, params, path, location, point)
    for gpath in spec.sweep:
        if gpath.split(".")[0] not in Spec.model_fields:
            raise SpecError(path, f"sweep.{gpath}", f"unknown spec field {gpath.split('.')[0]!r}")
    try:
        cells = expand(spec, registry)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise SpecError(path, f"sweep ({loc})", err["msg"]) from None
    if spec.sweep:
        for cell in cells:
            cls = registry.get(cell.kind, cell.component).cls
            _validate(cls, cell.params, path, f"sweep → {cell.method}", cell.point)
    if any(c.kind == "mechanism" for c in cells):
        _check_evaluation(registry, spec)
    from dpkit.evidence.check import check_claims

    check_claims(spec, cells)


def _check_evaluation(registry, spec: Spec) -> None:
    try:
        task = registry.get("defense", MECHANISM_TASK).cls
    except ComponentNotFoundError:
        raise SpecError(spec.path, "mechanism", f"mechanism entries need the {MECHANISM_TASK!r} "
                        "defense, which no loaded plug-in provides (is plug-in 'tasks' disabled?)"
                        ) from None
    mech = spec.mechanism or next(b for b in spec.baselines if b.kind != "defense")
    try:
        task.Params.model_validate({**spec.evaluation, "mechanism": mech.name,
                                    "mechanism_params": mech.params})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise SpecError(spec.path, "evaluation." + ".".join(str(p) for p in err["loc"]),
                        err["msg"]) from None


def _lookup(registry, path: str, kinds: tuple[str, ...], location: str, name: str):
    try:
        return registry.find(name, kinds).cls
    except ComponentNotFoundError as exc:
        raise SpecError(path, location, str(exc)) from None


def _check_ref(registry, path: str, kind: str, location: str, name: str, params: dict) -> None:
    cls = _lookup(registry, path, (kind,), f"{location}.name", name)
    _validate(cls, params, path, location, {})


def _validate(cls, params: dict, path: str, location: str, point: dict) -> None:
    try:
        cls.Params.model_validate(params)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            known = list(cls.Params.model_fields)
            close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known) or 'none'}"
            msg = f"unknown parameter {err['loc'][-1]!r} of {cls.name!r}; {hint}"
        swept = next((k for k in point if k == field or field.startswith(k + ".")), None)
        where = f"{location}.sweep.{swept}={point[swept]!r}" if swept else f"{location}.params.{field}"
        raise SpecError(path, where, msg.removeprefix("Value error, ")) from None
