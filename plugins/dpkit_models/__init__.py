"""Built-in models: word-vector tables and split encoders from pinned artifacts, any Hugging Face
model from a folder, and tiny random models for tests."""

import dpkit
from dpkit_models.catalogue import MODELS

__all__ = ["MODELS"]


@dpkit.hookimpl
def dpkit_register_models(register) -> None:
    """Register the built-in models."""
    for cls in MODELS:
        register(cls)
