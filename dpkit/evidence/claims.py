"""The ``claims:`` section of a spec: method A against method B on a metric, in a direction."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Scalar = float | int | str | bool


class Claim(BaseModel):
    """One declared claim, judged on paired seeds after a run (see docs/evidence.md)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="short title; generated from the fields if absent")
    method: str = Field(min_length=1, description="label of method A (as in the table)")
    versus: str = Field(min_length=1, description="label of method B")
    metric: str = Field(min_length=1, description="the metric compared")
    direction: Literal["greater", "less"] = Field(description="A's metric is greater / less")
    margin: float = Field(0.0, description="by at least this much; negative = non-inferiority")
    relative: bool = Field(False, description="margin is a fraction of B: A > (1+m)·B or "
                           "A < (1−m)·B")
    at: Literal["equal", "matched"] = Field("equal", description="equal sweep value, or matched "
                                            "value of the privacy metric")
    over: str | None = Field(None, description="'equal': the sweep key (default: report.x)")
    privacy: str | None = Field(None, description="'matched': the privacy metric to match on")
    points: Literal["all"] | list[Scalar] = Field("all", description="values of `over` (equal) "
                                                  "or of `privacy` (matched), or all")
    where: dict[str, Scalar] = Field(default_factory=dict, description="fix other swept values "
                                     "(rows without the key are kept)")
    paper_effect: float | dict[float, float] | None = Field(
        None, description="the paired difference the paper reports, in the "
        "units of the tested difference (A − B; A − (1 ± m)·B with a relative margin): one "
        "number, or one per compared sweep value (at: equal)")
    paper_source: str | None = Field(None, min_length=1, description="where in the paper "
                                     "paper_effect comes from (table, setting, numbers)")
    robustness: list[str] = Field(default_factory=list, description="other metrics the same "
                                  "claim is judged on (e.g. the metric with a calibration fitted "
                                  "on another sample); the run says whether the verdict moves")

    @model_validator(mode="after")
    def _consistent(self) -> Claim:
        if self.method == self.versus:
            raise ValueError(f"method and versus are both {self.method!r}; compare two methods")
        if self.at == "matched" and not self.privacy:
            raise ValueError("at: matched needs `privacy:`, the metric to match the methods on "
                             "(e.g. recovery_at5)")
        if self.at == "equal" and self.privacy:
            raise ValueError("`privacy:` is only used with at: matched; remove it or set "
                             "at: matched")
        if self.at == "matched" and self.over:
            raise ValueError("`over:` is only used with at: equal (matched points are values of "
                             "the privacy metric)")
        if self.at == "matched" and self.points != "all" and not all(
                isinstance(p, (int, float)) and not isinstance(p, bool) for p in self.points):
            raise ValueError("at: matched points are numbers (values of the privacy metric)")
        if isinstance(self.points, list) and not self.points:
            raise ValueError("points is empty; list sweep values or write points: all")
        if self.relative and self.direction == "less" and not 0 <= self.margin < 1:
            raise ValueError(f"a relative margin with direction less is a fraction in [0, 1), "
                             f"got {self.margin}")
        if self.relative and self.direction == "greater" and self.margin <= -1:
            raise ValueError(f"a relative margin with direction greater must exceed -1, got "
                             f"{self.margin}")
        self._check_paper_effect()
        if self.metric in self.robustness or len(set(self.robustness)) != len(self.robustness):
            raise ValueError(f"robustness lists {self.robustness}: name each other metric once, "
                             f"not the claim's own metric {self.metric!r}")
        return self

    def _check_paper_effect(self) -> None:
        if (self.paper_effect is None) != (self.paper_source is None):
            raise ValueError("paper_effect and paper_source go together: give the effect the "
                             "paper reports and where (e.g. 'Table 5, DistilBERT, η = 100')")
        if isinstance(self.paper_effect, dict):
            if self.at == "matched":
                raise ValueError("with at: matched the compared points are computed from the "
                                 "data; give paper_effect as one number")
            if not self.paper_effect:
                raise ValueError("paper_effect is an empty mapping; give one number or one per "
                                 "sweep value")
        for value in self.paper_effects():
            if not math.isfinite(value):
                raise ValueError(f"paper_effect must be finite, got {value}")
            beyond = value > self.threshold() if self.direction == "greater" else \
                value < self.threshold()
            if not beyond:
                op = ">" if self.direction == "greater" else "<"
                raise ValueError(f"paper_effect {value:g} does not support the claim: with "
                                 f"direction {self.direction} the paper's difference must be "
                                 f"{op} {self.threshold():g} (the threshold); state the claim "
                                 "the paper makes")

    def paper_effects(self) -> list[float]:
        """Every effect value given (empty without ``paper_effect``)."""
        if self.paper_effect is None:
            return []
        if isinstance(self.paper_effect, dict):
            return list(self.paper_effect.values())
        return [float(self.paper_effect)]

    def paper_effect_at(self, point) -> float | None:
        """The paper's effect at a compared point (None where the paper gives none)."""
        if isinstance(self.paper_effect, dict):
            return self.paper_effect.get(point) if isinstance(point, float) else None
        return None if self.paper_effect is None else float(self.paper_effect)

    def title(self) -> str:
        """The claim in words, e.g. ``SnD accuracy > TokEmbPriv + 0.02 at equal eta``."""
        if self.name:
            return self.name
        op = ">" if self.direction == "greater" else "<"
        if self.relative:
            factor = 1 + self.margin if self.direction == "greater" else 1 - self.margin
            rhs = f"{factor:g} × {self.versus}"
        elif self.margin:
            sign = self.margin if self.direction == "greater" else -self.margin
            rhs = f"{self.versus} {'+' if sign > 0 else '−'} {abs(sign):g}"
        else:
            rhs = self.versus
        where = f"matched {self.privacy}" if self.at == "matched" else f"equal {self.over or 'x'}"
        return f"{self.method} {self.metric} {op} {rhs}, at {where}"

    def threshold(self) -> float:
        """What the paired difference must exceed (greater) or stay below (less)."""
        if self.relative:
            return 0.0
        return self.margin if self.direction == "greater" else -self.margin

    def difference(self, a: float, b: float) -> float:
        """The paired difference tested against :meth:`threshold`."""
        if self.relative:
            factor = 1 + self.margin if self.direction == "greater" else 1 - self.margin
            return a - factor * b
        return a - b
