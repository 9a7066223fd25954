"""Built-in model catalogue, registered through ``dpkit_register_models``."""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field

import dpkit
from dpkit.models.tiny import tiny_causal, tiny_encoder


class TinyParams(dpkit.Params):
    """Shape and seed of a tiny random model."""

    hidden_size: int = Field(32, ge=4, le=1024, description="width d (divisible by num_heads)")
    num_layers: int = Field(2, ge=1, le=24)
    num_heads: int = Field(2, ge=1, le=32)
    seed: int = Field(0, ge=0)


class TinyEncoder:
    """Tiny random BERT encoder with a WordPiece tokenizer (offline, seeded; for tests)."""

    name: ClassVar[str] = "tiny-encoder"
    Params: ClassVar[type[TinyParams]] = TinyParams
    kind: ClassVar[str] = "split encoder"
    source: ClassVar[str] = "built from a config"

    def __init__(self, params: TinyParams):
        self.params = params

    def load(self, device: torch.device):
        """Build the model on ``device``."""
        p = self.params
        return tiny_encoder(p.hidden_size, p.num_layers, p.num_heads, p.seed, device)


class TinyCausal(TinyEncoder):
    """Tiny random Llama causal LM with a WordPiece tokenizer (offline, seeded; for tests)."""

    name: ClassVar[str] = "tiny-causal"
    kind: ClassVar[str] = "split causal LM"

    def load(self, device: torch.device):
        """Build the model on ``device``."""
        p = self.params
        return tiny_causal(p.hidden_size, p.num_layers, p.num_heads, p.seed, device)


MODELS: tuple[type, ...] = (TinyEncoder, TinyCausal)


@dpkit.hookimpl
def dpkit_register_models(register) -> None:
    """Register the built-in models."""
    for cls in MODELS:
        register(cls)
