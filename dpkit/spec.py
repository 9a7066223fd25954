"""Experiment specs: YAML (safe_load only) validated by pydantic, expanded into cells.

``load_spec(path)`` reads, merges ``include:`` files, validates the structure and every component's
params against its own ``Params`` model (each sweep point too), and returns a :class:`Spec`. Every
problem raises :class:`dpkit.errors.SpecError` with ``FILE: location — message``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dpkit.errors import SpecError
from dpkit.evidence.claims import Claim

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ComponentRef(_Strict):
    """A registered dataset, model or attack by name, with its params."""

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class MethodEntry(_Strict):
    """A defense or mechanism to evaluate, with params and its own sweep over param paths."""

    name: str = Field(min_length=1)
    label: str | None = None
    kind: Literal["defense", "mechanism"] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)

    @field_validator("sweep")
    @classmethod
    def _non_empty_values(cls, sweep: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path, values in sweep.items():
            if not values:
                raise ValueError(f"sweep {path!r} has no values; give at least one")
        return sweep

    @property
    def display(self) -> str:
        """The label shown in tables and plots."""
        return self.label or self.name


class PrivacySettings(_Strict):
    """How the cell's ledger composes: δ, accountant, optional ε ceiling."""

    delta: float = Field(1e-5, gt=0, lt=1)
    accountant: Literal["rdp", "pld"] = "rdp"
    ceiling: float | None = Field(None, gt=0, description="refuse spends past this ε at delta")


class ReportSettings(_Strict):
    """Which metrics the table and the plot put first."""

    x: str | None = None
    utility: str | None = None
    privacy: str | None = None


class Resources(_Strict):
    """What one cell needs (used by distributed executors)."""

    cpus: float = Field(1.0, gt=0)
    gpus: float = Field(0.0, ge=0)


class Spec(_Strict):
    """A validated experiment spec."""

    name: str = Field(pattern=_NAME)
    description: str = ""
    data: ComponentRef
    model: ComponentRef | None = None
    defense: MethodEntry | None = None
    mechanism: MethodEntry | None = None
    baselines: list[MethodEntry] = Field(default_factory=list)
    attacks: list[ComponentRef] = Field(default_factory=list)
    evaluation: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    resources: Resources = Field(default_factory=Resources)
    output: str | None = None
    claims: list[Claim] = Field(default_factory=list, description="see docs/evidence.md")
    path: str = Field("", exclude=True)

    @model_validator(mode="after")
    def _one_method(self) -> Spec:
        if (self.defense is None) == (self.mechanism is None):
            raise ValueError("give exactly one of 'defense' or 'mechanism' (baselines go under "
                             "'baselines')")
        return self

    def methods(self) -> list[tuple[str, MethodEntry]]:
        """(location, entry) of the main method and every baseline."""
        main = ("defense", self.defense) if self.defense else ("mechanism", self.mechanism)
        return [main] + [(f"baselines.{i}", b) for i, b in enumerate(self.baselines)]

    def output_dir(self) -> Path:
        """The output folder: ``output`` or ``runs/<name>``."""
        return Path(self.output or Path("runs") / self.name)


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


def parse_spec(raw: dict, path: str = "<spec>", registry=None) -> Spec:
    """Validate a spec mapping: structure first, then components against the registry."""
    try:
        spec = Spec.model_validate({**raw, "path": str(path)})
    except ValidationError as exc:
        raise SpecError(str(path), *_first_error(exc)) from None
    from dpkit.spec_check import check_components

    check_components(spec, registry)
    return spec


def load_spec(path: str | Path, registry=None) -> Spec:
    """Read and fully validate the spec at ``path``."""
    return parse_spec(read_yaml(path), str(path), registry)


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {err['loc'][-1]!r}; remove it or check its spelling"
    msg = re.sub(r"^Value error, ", "", msg)
    return loc, msg
