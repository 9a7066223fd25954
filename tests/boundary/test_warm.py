"""The fork server warms the spec's public CPU models once; a server process then finds them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch

import dpkit.contract.context as context
from dpkit.boundary import warm


def test_the_specs_cpu_models_are_warmed_once_and_found_by_the_server_loader(toy_plugins,
                                                                             monkeypatch):
    cells = [SimpleNamespace(model={"name": "toy_space", "params": {}}, device=device)
             for device in ("cpu", "auto", "cpu")] + [SimpleNamespace(model=None, device="cpu")]
    refs = warm.warm_references(cells)
    assert refs == [{"name": "toy_space", "params": {}}]  # once, and no model-less cell
    monkeypatch.setenv(warm.VARIABLE, json.dumps(refs))
    context.clear_loaded()
    built = []
    real = toy_plugins.build

    def counting(kind, name, params=None):
        built.append((kind, name))
        return real(kind, name, params)

    monkeypatch.setattr(toy_plugins, "build", counting)
    monkeypatch.setattr("dpkit.boundary.host.registry_from_modules", lambda modules: toy_plugins)
    assert warm.warm_from_environment({}) == 1 and built == [("model", "toy_space")]
    model = context.load_component(toy_plugins, "model", "toy_space", {}, torch.device("cpu"))
    assert built == [("model", "toy_space")] and model is not None  # from the warm cache
    context.clear_loaded()
