"""Parameters of STENCIL and dχ-STENCIL, importable without torch (``dpkit validate``)."""

from __future__ import annotations

from pydantic import Field, model_validator

import dpkit
from dpkit_stencil.window import max_contribution


class StencilParams(dpkit.Params):
    """Window size L, Gaussian σ, decoding metric and stop-word handling (§4 of the paper)."""

    window: int = Field(default=5, ge=1, le=64, description="window size L (odd or even)")
    sigma: float = Field(default=1.25, gt=0, allow_inf_nan=False, description="Gaussian σ")
    metric: str = Field(default="cosine", pattern="^(l2|cosine)$",
                        description="distance used to decode the mixed vector")
    keep_stop_words: bool = Field(default=True, description="leave stop words unchanged (§4)")


class DxStencilParams(StencilParams):
    """STENCIL's window parameters plus the Laplace dχ parameter η."""

    eta: float = Field(gt=0, allow_inf_nan=False, description="dχ privacy parameter η")

    @model_validator(mode="after")
    def _window_fits(self) -> DxStencilParams:
        max_contribution(self.window, self.sigma)
        return self
