"""Parameters of the generic attacks, importable without torch (``dpkit validate``)."""

from __future__ import annotations

from pydantic import Field

from dpkit import Params


class AttributeInferenceParams(Params):
    """Share of the observed records whose attribute the attacker knows (auxiliary data), MLP size."""

    aux_fraction: float = Field(default=0.5, gt=0, lt=1)
    hidden: int = Field(default=128, ge=1)
    epochs: int = Field(default=60, ge=1)


class MutualInformationParams(Params):
    """k of the k-NN estimator and how many token vectors to use."""

    k: int = Field(default=3, ge=1, le=100)
    max_samples: int = Field(default=5000, ge=10, description="use at most this many vectors")


class KnnParams(Params):
    """Which k to report and the distance used to rank candidates."""

    ks: tuple[int, ...] = Field(default=(1, 5), min_length=1, description="report top-k for these k")
    metric: str = Field(default="l2", pattern="^(l2|cosine)$")
    max_queries: int | None = Field(default=None, ge=1, description="score at most this many tokens")
