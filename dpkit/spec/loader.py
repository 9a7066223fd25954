"""Reading a spec file: YAML (safe_load only), ``include:`` merging, structural validation.

Parsing only: component names and params are checked against a registry by
:mod:`dpkit.spec.check`. Every problem is a :class:`dpkit.base.errors.SpecError`
``FILE: location — message``.
"""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dpkit.base.errors import SpecError
from dpkit.spec.paths import resolve_relative
from dpkit.spec.schema import Spec


def read_yaml(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict:
    """Read a spec file (safe_load only), merging ``include:`` files; the root must be a mapping."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(str(path), "", f"no such file; {_closest_file(p)}")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(str(path), where, f"invalid YAML: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(str(path), "", "not UTF-8 text; a spec is a YAML file") from None
    if raw is None:
        raise SpecError(str(path), "", "the file is empty; a spec is a YAML mapping with name, "
                        "data and a defense or mechanism")
    if not isinstance(raw, dict):
        raise SpecError(str(path), "", f"the root must be a mapping, got {type(raw).__name__}")
    raw = resolve_relative(raw, p.parent)
    includes = raw.pop("include", [])
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise SpecError(str(path), "include", "must be a file name or a list of file names")
    merged: dict = {}
    for inc in includes:
        target = (p.parent / inc).resolve()
        if target in _seen or target == p.resolve():
            raise SpecError(str(path), "include", f"{inc!r} includes itself (a cycle)")
        merged = deep_merge(merged, read_yaml(target, _seen + (p.resolve(),)))
    return deep_merge(merged, raw)


PLUGIN_PARAMS = ("params", "evaluation")
"""Mappings a plug-in defines (its params; the mechanism task's ``evaluation``): there ``null`` is
a value (``max_examples: null``: all of them), never a removal."""


def deep_merge(base: dict, override: dict, *, _params: bool = False) -> dict:
    """``override`` on top of ``base`` (what ``include:`` does), like Hydra's config groups and
    JSON Merge Patch:

    - nested mappings merge key by key, except that a **component replaced by another** (a mapping
      whose ``name`` differs from the included one's) replaces it whole: its params, sweep and
      label are its own, none of the included component's;
    - ``key: null`` **removes** an included key of the spec (``sweep: null``, ``model: null``), so
      the key takes its default; inside a plug-in's params (:data:`PLUGIN_PARAMS`) null is a
      value and replaces the included one;
    - lists and everything else replace.
    """
    out = dict(base)
    for key, value in override.items():
        in_params = _params or key in PLUGIN_PARAMS
        if value is None and not _params and key in out:
            del out[key]
        elif isinstance(value, dict) and isinstance(out.get(key), dict) \
                and not _replaces(out[key], value):
            out[key] = deep_merge(out[key], value, _params=in_params)
        else:
            out[key] = value
    return out


def _replaces(included: dict, override: dict) -> bool:
    """Whether ``override`` names another component than ``included`` (then it replaces it)."""
    return "name" in included and "name" in override and included["name"] != override["name"]


def _closest_file(path: Path) -> str:
    """Did-you-mean for a spec file name: the closest YAML file beside it or under specs/."""
    folders = [path.parent, path.parent / "specs"] if path.parent.is_dir() else [Path("specs")]
    found = [f for d in folders if d.is_dir() for f in sorted(d.iterdir())
             if f.suffix in (".yaml", ".yml") and f.is_file()]
    by_name = {f.name: f for f in reversed(found)}
    close = difflib.get_close_matches(path.name, list(by_name), n=1, cutoff=0.6)
    if close:
        return f"did you mean {by_name[close[0]]}?"
    return "check the path (the specs that come with dpkit are in specs/)"


def parse_structure(raw: dict, path: str = "<spec>") -> Spec:
    """Validate a spec mapping's structure (types, bounds, unknown keys); no registry involved."""
    try:
        return Spec.model_validate({**raw, "path": str(path)})
    except ValidationError as exc:
        raise SpecError(str(path), *_first_error(exc)) from None


def _first_error(exc: ValidationError) -> tuple[str, str]:
    errors = exc.errors()
    # a misspelt key is both unknown and (its right spelling) missing: name the misspelling
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        known = _keys_at(Spec, err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else (
            f"known keys here: {', '.join(known)}" if known else "remove it")
        msg = f"unknown key {err['loc'][-1]!r}; {hint}"
    msg = re.sub(r"^Value error, ", "", msg)
    return loc, msg


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the spec schema allows at ``loc`` (a pydantic error location), if it knows them."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue  # an index into a list of models: same model
        field = current.model_fields.get(part) if _is_model(current) else None
        if field is None:
            return []
        current = next((t for t in _types_in(field.annotation) if _is_model(t)), None)
    return [k for k, f in current.model_fields.items() if not f.exclude] if _is_model(current) else []


def _types_in(annotation: Any) -> list[Any]:
    """Every type an annotation names (through Optional, unions, lists, dicts)."""
    args = typing.get_args(annotation)
    return [annotation, *(t for a in args for t in _types_in(a))]


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)
