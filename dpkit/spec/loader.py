"""Reading a spec file: YAML (safe_load only), ``include:`` merging, structural validation.

Parsing only: component names and params are checked against a registry by
:mod:`dpkit.spec.check`. Every problem is a :class:`dpkit.base.errors.SpecError`
``FILE: location — message``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from dpkit.base.errors import SpecError
from dpkit.spec.schema import Spec


def read_yaml(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict:
    """Read a spec file (safe_load only), merging ``include:`` files; the root must be a mapping."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(str(path), "", "no such file; check the path (specs live in specs/)")
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


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``, merging nested mappings."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_structure(raw: dict, path: str = "<spec>") -> Spec:
    """Validate a spec mapping's structure (types, bounds, unknown keys); no registry involved."""
    try:
        return Spec.model_validate({**raw, "path": str(path)})
    except ValidationError as exc:
        raise SpecError(str(path), *_first_error(exc)) from None


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {err['loc'][-1]!r}; remove it or check its spelling"
    msg = re.sub(r"^Value error, ", "", msg)
    return loc, msg
