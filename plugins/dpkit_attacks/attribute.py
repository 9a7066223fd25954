"""Attribute inference: an MLP trained on labelled auxiliary privatized representations."""

from __future__ import annotations

from typing import ClassVar

import torch

from dpkit import Component, ServerView
from dpkit_attacks.params import AttributeInferenceParams


def train_mlp_classifier(x: torch.Tensor, y: torch.Tensor, *, generator: torch.Generator,
                         hidden: int = 128, epochs: int = 60, lr: float = 1e-2,
                         weight_decay: float = 1e-4) -> torch.nn.Module:
    """A 2-layer MLP fitted on ``x`` ``[N, d]`` and integer labels ``y`` ``[N]`` (full-batch Adam)."""
    n_classes = int(y.max()) + 1
    torch_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device=generator.device))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torch_seed)
        model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(),
                                    torch.nn.Linear(hidden, n_classes)).to(x.device)
    mean, std = x.mean(0, keepdim=True), x.std(0, keepdim=True).clamp_min(1e-6)
    model.register_buffer("mean", mean)
    model.register_buffer("std", std)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    xs = (x - mean) / std
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), y).backward()
        opt.step()
    return model


def mlp_predict(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Predicted labels of a model from :func:`train_mlp_classifier`."""
    with torch.no_grad():
        mean, std = model.get_buffer("mean"), model.get_buffer("std")
        return model((x - mean) / std).argmax(1)


def attribute_inference(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
                        test_y: torch.Tensor, *, generator: torch.Generator, **mlp) -> dict[str, float]:
    """Accuracy of an MLP attacker and of the majority-class guess on the test representations."""
    model = train_mlp_classifier(train_x.float(), train_y.long(), generator=generator, **mlp)
    accuracy = float((mlp_predict(model, test_x.float()) == test_y).float().mean())
    majority = float((test_y == torch.bincount(train_y.long()).argmax()).float().mean())
    return {"attribute_accuracy": accuracy, "attribute_majority": majority}


class AttributeInference(Component):
    """Infers a private attribute (e.g. the label) from privatized representations with an MLP.

    Runs where the server is: its guesses are the representations it observed and, when its
    server computed some, ``view.knowledge['aux_representations']`` (e.g. its own outputs on the
    training uploads). The MLP is fitted where the truth is, at scoring: on the auxiliary
    representations labelled by ``truth['aux_attributes']`` when both exist, otherwise on an
    ``aux_fraction`` of the observed records whose attributes the threat model gives the attacker.
    """

    name: ClassVar[str] = "attribute_inference"
    requires: ClassVar[tuple[str, ...]] = ("representations",)
    Params = AttributeInferenceParams

    params: AttributeInferenceParams

    def run(self, view: ServerView, ctx) -> dict:
        """The observed representations, the auxiliary labelled data if the attacker has some,
        and the attacker's seeded generator."""
        return {"x": view.observed["representations"],
                "aux_x": view.knowledge.get("aux_representations"),
                "seed": ctx.generator("attribute_inference", device="cpu").initial_seed()}

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """``attribute_accuracy`` of the attacker and the ``attribute_majority`` baseline.

        Without auxiliary data the threat model gives the attacker the attributes of an
        ``aux_fraction`` of the observed records; that fraction is drawn here, where the truth is.
        """
        x, y = guesses["x"], truth.get("attributes")
        gen = torch.Generator().manual_seed(int(guesses["seed"]))
        if y is None:
            raise ValueError("attribute_inference needs truth['attributes'] to score against")
        y = torch.as_tensor(y, device=x.device).long()
        aux_x, aux_y = guesses.get("aux_x"), truth.get("aux_attributes")
        if aux_x is not None and aux_y is not None and len(aux_x) == len(aux_y) > 0:
            train_x = aux_x.to(x.device)
            train_y = torch.as_tensor(aux_y, device=x.device).long()
            test_x, test_y = x, y
        else:
            order = torch.randperm(len(y), generator=gen).to(x.device)
            cut = max(1, int(self.params.aux_fraction * len(y)))
            train_x, train_y, test_x, test_y = x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]
        return attribute_inference(train_x, train_y, test_x, test_y, generator=gen,
                                   hidden=self.params.hidden, epochs=self.params.epochs)
