"""Parameters of ``privatize_text``, importable without torch (``dpkit validate``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dpkit import Params


class PrivatizeTextParams(Params):
    """Which mechanism, on which split, with which OOV policy, and how utility is measured."""

    mechanism: str = Field(description="registered mechanism name (domain 'embedding' or 'token')")
    mechanism_params: dict[str, Any] = Field(default_factory=dict)
    split: str = "test"
    oov: Literal["drop", "keep"] = Field(default="drop", description="unknown words: drop, or keep "
                                         "verbatim (released without protection)")
    max_tokens_per_doc: int | None = Field(default=128, ge=1)
    max_docs: int | None = Field(default=None, ge=1)
    decode_metric: Literal["l2", "cosine"] = "l2"
    utility: Literal["none", "classifier"] = "none"
    classifier_features: Literal["mean_vectors", "bow"] = "mean_vectors"
    classifier_train_docs: int = Field(default=5000, ge=2)
