"""Parameters of the baseline mechanisms, importable without torch (``dpkit validate`` reads
them, and the mechanisms' guarantees, without loading a model)."""

from __future__ import annotations

from pydantic import Field

import dpkit


class LaplaceDxParams(dpkit.Params):
    """η (privacy parameter, larger = less noise) and the optional SnD norm clip bound."""

    eta: float = Field(gt=0, allow_inf_nan=False, description="dχ privacy parameter η")
    clip_bound: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                     description="clip noisy vectors to this L2 norm (SnD Eq. 3)")


class Text2TextParams(dpkit.Params):
    """η and the decoding metric (decoding uses only the noisy vector: post-processing)."""

    eta: float = Field(gt=0, allow_inf_nan=False, description="dχ privacy parameter η")
    metric: str = Field(default="l2", pattern="^(l2|cosine)$",
                        description="distance used to decode the noisy vector")
    keep_stop_words: bool = Field(default=False, description="release stop words unchanged "
                                  "(as dχ-STENCIL's comparison does; they get no protection)")


class SanTextParams(dpkit.Params):
    """ε of the exponential mechanism (the utility is −L2 distance, sensitivity-free form)."""

    epsilon: float = Field(gt=0, allow_inf_nan=False, description="privacy parameter ε")


class SanTextPlusParams(dpkit.Params):
    """ε, p (resampling probability of non-sensitive words) and w (sensitive share)."""

    epsilon: float = Field(gt=0, allow_inf_nan=False, description="privacy parameter ε")
    p: float = Field(default=0.3, ge=0, le=1, description="P(resample a non-sensitive word)")
    sensitive_share: float = Field(default=0.9, gt=0, le=1,
                                   description="share w of least-frequent words deemed sensitive")


class CusTextParams(dpkit.Params):
    """ε of the exponential mechanism and the output-set size K."""

    epsilon: float = Field(gt=0, allow_inf_nan=False, description="privacy parameter ε")
    top_k: int = Field(default=20, ge=2, le=10_000, description="output-set size K")
