"""The spec schema: pydantic models of an experiment spec's structure (no registry involved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from dpkit.contract.privacy import PrivacySettings
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
    seeds: list[int] | None = Field(None, min_length=1, description=(
        "this method's seeds instead of the spec's (e.g. more seeds on the cells a claim needs, "
        "one on a secondary row); `dpkit run --seeds N` overrides both"))

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int] | None) -> list[int] | None:
        if seeds is not None and len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds {seeds} repeat a value; list each seed once")
        return seeds

    @field_validator("sweep", mode="before")
    @classmethod
    def _null_is_no_sweep(cls, sweep: Any) -> Any:
        return {} if sweep is None else sweep

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


class SelectionSettings(_Strict):
    """Which cells are released: all (``none``), or only the best by a score computed on
    ``public`` or ``private`` data (see docs/accounting.md, "Releasing the best cell")."""

    data: Literal["none", "public", "private"] = "none"
    metric: str | None = Field(None, description="the score the best cell is chosen by")
    direction: Literal["max", "min"] = "max"
    score_in_ledger: bool = Field(False, description="private only: each cell's ledger already "
                                  "covers its score (a DP score)")

    @model_validator(mode="after")
    def _metric_named(self) -> SelectionSettings:
        if self.data != "none" and not self.metric:
            raise ValueError(f"selection on {self.data} data needs the score: selection: "
                             f"{{data: {self.data}, metric: accuracy}}")
        return self


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
    selection: SelectionSettings = Field(default_factory=SelectionSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    resources: Resources = Field(default_factory=Resources)
    output: str | None = Field(None, description="the run's folder, relative to where you run")
    paths_relative_to: Literal["spec", "cwd"] = Field(
        "spec", description="relative file paths in params are read from the spec's folder "
        "(spec) or from where dpkit runs (cwd, the older reading)")
    claims: list[Claim] = Field(default_factory=list, description="see docs/evidence.md")
    path: str = Field("", exclude=True)
    _checked: Any = PrivateAttr(default=None)  # (registry, content, cells) of the last check

    @field_validator("sweep", mode="before")
    @classmethod
    def _null_is_no_sweep(cls, sweep: Any) -> Any:
        return {} if sweep is None else sweep

    @model_validator(mode="after")
    def _one_method(self) -> Spec:
        if (self.defense is None) == (self.mechanism is None):
            raise ValueError("give exactly one of 'defense' or 'mechanism' (baselines go under "
                             "'baselines')")
        return self

    def methods(self) -> list[tuple[str, MethodEntry]]:
        """(location, entry) of the main method and every baseline."""
        if self.defense is not None:
            main = ("defense", self.defense)
        else:
            assert self.mechanism is not None  # exactly one of the two (validated)
            main = ("mechanism", self.mechanism)
        return [main] + [(f"baselines.{i}", b) for i, b in enumerate(self.baselines)]

    def output_dir(self) -> Path:
        """The output folder: ``output`` or ``runs/<name>``."""
        return Path(self.output or Path("runs") / self.name)
