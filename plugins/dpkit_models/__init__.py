"""Built-in models: word-vector tables and split encoders from pinned artifacts, any Hugging Face
model from a folder, and tiny random models for tests.

Registered by reference: building the registry imports only :mod:`dpkit_models.params`.
"""

import dpkit

MODELS = {
    "glove-6b-50d": ("Glove6B50d", "VocabParams"),
    "glove-840b-300d": ("Glove840B300d", "VocabParams"),
    "minilm": ("MiniLM", "SplitParams"),
    "smollm2-135m": ("SmolLM2", "SplitParams"),
    "hf": ("HFModel", "HFParams"),
    "tiny-encoder": ("TinyEncoder", "TinyParams"),
    "tiny-causal": ("TinyCausal", "TinyParams"),
}
"""Model name -> (class in dpkit_models.catalogue, its Params in dpkit_models.params)."""


@dpkit.hookimpl
def dpkit_register_models(register) -> None:
    """Register the built-in models."""
    for name, (cls, params) in MODELS.items():
        register(f"{__name__}.catalogue:{cls}", name=name, params=f"{__name__}.params:{params}")
