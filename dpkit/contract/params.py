"""Base class for component parameters."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    """Strict, frozen parameters: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class NoParams(Params):
    """Parameters of a component that takes none."""
