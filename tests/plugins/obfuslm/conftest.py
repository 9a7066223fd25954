"""Fixtures for the ObfusLM plug-in tests: tiny models, a tiny labelled corpus, a public corpus
the server may load by name, and a RunContext whose server runs in this process (bytes both ways)."""

from __future__ import annotations

import random
from typing import ClassVar

import pytest
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import Ledger
from dpkit.boundary.session import connector
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry
from dpkit.contract.registry import Registry
from dpkit.data.types import TextDataset, TextSplit
from dpkit.testing.params_contract import register_test_model

GOOD = ["good", "great", "love", "fresh", "fun"]
BAD = ["bad", "hate", "rotten", "boring", "poor"]
FILL = ["the", "movie", "film", "story", "plot", "actor", "was", "a", "and", "it", "is"]


def tiny_corpus(n: int, seed: int = 0) -> TextDataset:
    """Two-class sentences over the tiny tokenizer's words (label 1 = positive words)."""
    rng = random.Random(seed)

    def make(m: int) -> TextSplit:
        texts, labels = [], []
        for _ in range(m):
            label = rng.randrange(2)
            words = rng.choices(FILL, k=8) + rng.choices(GOOD if label else BAD, k=3)
            rng.shuffle(words)
            texts.append(" ".join(words))
            labels.append(label)
        return TextSplit(texts, labels)

    return TextDataset("tiny_sentiment", {"train": make(n), "test": make(n // 2)},
                       label_names=("neg", "pos"))


class TinyPublic:
    """Public sentences over the tiny tokenizer's words (another seed than any private corpus)."""

    name: ClassVar[str] = "obfuslm_tiny_public"

    class Params(dpkit.Params):
        n: int = Field(200, ge=2)

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        return tiny_corpus(self.params.n, seed=1234)


PUBLIC = {"public_dataset": TinyPublic.name, "public_params": {"n": 200}}
"""Defense params naming the tiny public corpus as the attacker's public data."""

_REGISTRY: list[Registry] = []


def obfus_registry() -> Registry:
    """The installed plug-ins plus the tiny public corpus (one per test session)."""
    if not _REGISTRY:
        reg = Registry()
        for kind, entries in get_registry().entries.items():
            reg.entries[kind].update(entries)
        reg.modules.update(get_registry().modules)
        reg.add("dataset", TinyPublic, "obfuslm-tests")
        _REGISTRY.append(reg)
    return _REGISTRY[0]




def make_ctx(model, dataset, seed: int = 0) -> RunContext:
    """A RunContext on CPU with a fresh ledger; the defense's server runs in this process and
    loads ``model`` by name (it still receives everything as bytes)."""
    registry = obfus_registry()
    return RunContext(dataset=dataset, model=model, device=torch.device("cpu"), seed=seed,
                      ledger=Ledger(delta=1e-5), registry=registry,
                      model_ref=register_test_model(registry, model),
                      connect=connector("inprocess"))


def run_defense(name: str, params: dict, model, data, seed: int = 0):
    """Build the registered defense ``name`` and run it in a fresh context: (result, ctx)."""
    ctx = make_ctx(model, data, seed)
    return ctx.registry.build("defense", name, params).run(ctx), ctx


@pytest.fixture(scope="module")
def encoder():
    """A tiny BERT-style encoder (hidden size 32)."""
    from dpkit.models import tiny_encoder

    return tiny_encoder(hidden_size=32)


@pytest.fixture(autouse=True)
def one_thread():
    """Two threads on a loaded 2-core machine thrash; run these small workloads on one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def corpus() -> TextDataset:
    """A 160/80 two-class tiny corpus."""
    return tiny_corpus(160)


@pytest.fixture
def corpus_factory():
    """:func:`tiny_corpus` (importlib mode cannot import conftest)."""
    return tiny_corpus


@pytest.fixture
def ctx_factory():
    """:func:`make_ctx`."""
    return make_ctx
