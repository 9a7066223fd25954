"""Fixtures for the ObfusLM plug-in tests: tiny models, a tiny labelled corpus, a RunContext."""

from __future__ import annotations

import random

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.plugins import get_registry

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


def make_ctx(model, dataset, seed: int = 0) -> RunContext:
    """A RunContext on CPU with a fresh ledger."""
    return RunContext(dataset=dataset, model=model, device=torch.device("cpu"), seed=seed,
                      ledger=Ledger(delta=1e-5), registry=get_registry())


def run_defense(name: str, params: dict, model, data):
    """Build the registered defense ``name`` and run it in a fresh context: (result, ctx)."""
    ctx = make_ctx(model, data)
    return get_registry().build("defense", name, params).run(ctx), ctx


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
