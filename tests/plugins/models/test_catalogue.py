"""The built-in model catalogue registers through its hook and builds offline models by name."""

import torch

import dpkit_models
from dpkit.contract.registry import Registry


def test_registered_through_its_hook():
    reg = Registry()
    dpkit_models.dpkit_register_models(lambda cls, **how: reg.add("model", cls, "models", **how))
    assert {"glove-6b-50d", "minilm", "hf", "tiny-encoder", "tiny-causal"} <= set(reg.names("model"))
    model = reg.build("model", "tiny-causal", {"hidden_size": 16}).load(torch.device("cpu"))
    assert model.causal and model.hidden_size == 16
