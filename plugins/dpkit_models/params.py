"""Parameters of the built-in models, importable without torch (``dpkit validate``)."""

from __future__ import annotations

from pydantic import Field, model_validator

import dpkit


class VocabParams(dpkit.Params):
    """Restrict a word-vector table to its most frequent words."""

    max_vocab: int | None = Field(None, ge=1, description="keep the first n (most frequent) words")


class SplitParams(dpkit.Params):
    """Tokenizer truncation of a split model."""

    max_length: int = Field(128, ge=2, le=8192, description="default tokenizer truncation")


class HFParams(SplitParams):
    """A local Hugging Face folder or a hub id."""

    path: str | None = Field(None, description="local folder with config.json and weights")
    hub_id: str | None = Field(None, description="Hugging Face Hub repository id")
    revision: str | None = Field(None, description="hub revision (with hub_id)")
    gguf_file: str | None = Field(None, description="GGUF file inside the folder")
    causal: bool | None = Field(None, description="None: read from config.json architectures")

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.hub_id is None):
            raise ValueError(f"give exactly one of path or hub_id, got path={self.path!r}, "
                             f"hub_id={self.hub_id!r}")
        return self


class TinyParams(dpkit.Params):
    """Shape and seed of a tiny random model."""

    hidden_size: int = Field(32, ge=4, le=1024, description="width d (divisible by num_heads)")
    num_layers: int = Field(2, ge=1, le=24)
    num_heads: int = Field(2, ge=1, le=32)
    seed: int = Field(0, ge=0)
