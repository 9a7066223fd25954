"""Fixtures for the SnD tests: a tiny encoder, generated labelled text, a run context."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from pydantic import Field

import dpkit
import dpkit.contract.plugins
from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.data.types import TextDataset, TextSplit
from dpkit.models import tiny_encoder
from dpkit.contract.registry import Registry
from dpkit.testing import textdata
from dpkit.testing.textdata import generated_texts
from dpkit.boundary.session import connector
from dpkit.testing.params_contract import register_test_model

def generated_dataset(n_train: int = 96, n_test: int = 48, seed: int = 0) -> TextDataset:
    """The shared generated two-class dataset, at the sizes these tests use."""
    return textdata.generated_dataset(n_train, n_test, seed)


class GeneratedPublic:
    """Unlabelled generated public text for training denoisers in tests."""

    name: ClassVar[str] = "snd_test_public"

    class Params(dpkit.Params):
        n: int = Field(128, ge=2)

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        texts, _ = generated_texts(self.params.n, seed=7)
        return TextDataset("snd_test_public", {"train": TextSplit(texts)})


@pytest.fixture(scope="session")
def registry() -> Registry:
    """The installed plug-ins plus the generated public dataset."""
    reg = Registry()
    installed = dpkit.contract.plugins.get_registry()
    for kind, entries in installed.entries.items():
        reg.entries[kind].update(entries)
    reg.modules.update(installed.modules)  # what a server process loads
    reg.add("dataset", GeneratedPublic, "snd-tests")
    return reg


@pytest.fixture(scope="session")
def tiny_model():
    """A seeded tiny BERT split model (32-d)."""
    torch.manual_seed(0)
    return tiny_encoder(hidden_size=32, num_layers=2, num_heads=2, seed=0)


@pytest.fixture
def make_ctx(registry, tiny_model, tmp_path):
    """Factory of run contexts over the tiny model and generated data (fresh ledger each)."""
    def make(model=None, dataset=None, seed: int = 0, cache=None) -> RunContext:
        model = model or tiny_model
        return RunContext(dataset=dataset or generated_dataset(), model=model,
                          device=torch.device("cpu"), seed=seed, ledger=Ledger(delta=1e-5),
                          registry=registry, cache_dir=cache or tmp_path / "cache",
                          model_ref=register_test_model(registry, model),
                          connect=connector("inprocess"))
    return make


PUBLIC = {"name": "snd_test_public", "params": {"n": 128}}
SMALL = {"max_tokens": 16, "train_examples": 96, "test_examples": 48, "batch_size": 32,
         "classifier_epochs": 5, "mi_tokens": 200, "view_tokens": 100}
DENOISER = {"n_layers": 1, "d_ff": 64, "public": PUBLIC, "public_examples": 128, "epochs": 2,
            "batch_size": 32}


@pytest.fixture
def texts():
    """The generated-text function (test modules cannot import conftest under importlib mode)."""
    return generated_texts


@pytest.fixture
def small():
    """Small evaluation params, and denoiser params training on the generated public text."""
    return dict(SMALL), dict(DENOISER)
