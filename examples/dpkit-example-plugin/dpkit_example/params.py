"""Parameters of the example mechanism: pydantic and dpkit only, so ``dpkit validate`` reads them
without importing torch or the mechanism."""

from pydantic import Field

import dpkit


class ClippedGaussianParams(dpkit.Params):
    """Noise multiplier z (σ over the sensitivity 2C) and the clip bound C."""

    noise_multiplier: float = Field(1.0, gt=0, le=1e4, description="σ / sensitivity")
    clip: float = Field(1.0, gt=0, description="L2 norm bound C of a token embedding")
