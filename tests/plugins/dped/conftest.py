"""Tiny generated corpora and a run context for the DPED tests (no downloads)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dpkit
from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.boundary.session import connector
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.registry import Registry

TOPICS = (("cat", "dog", "horse", "cow", "sheep", "bird", "fish", "mouse"),
          ("car", "train", "plane", "bus", "truck", "boat", "bike", "ship"),
          ("red", "blue", "green", "yellow", "black", "white", "brown", "pink"))
FILLER = ("the", "a", "of", "and", "is", "in", "to", "it")


def make_texts(n: int, seed: int, length: int = 40) -> tuple[list[str], list[int]]:
    """Documents mixing filler words with words of one topic; returns texts and topic labels."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        topic = int(rng.integers(len(TOPICS)))
        words = [TOPICS[topic][rng.integers(8)] if rng.random() < 0.6 else FILLER[rng.integers(8)]
                 for _ in range(length)]
        texts.append(" ".join(words))
        labels.append(topic)
    return texts, labels


def tiny_dataset(name: str, n_train: int, n_test: int, seed: int) -> TextDataset:
    """A labelled tiny corpus with train and test splits."""
    tr, ltr = make_texts(n_train, seed)
    te, lte = make_texts(n_test, seed + 1)
    return TextDataset(name, {"train": TextSplit(tr, ltr), "test": TextSplit(te, lte)},
                       label_names=("animals", "vehicles", "colours"))


class TinyPublic:
    """Tiny public corpus source."""

    name = "tiny_public"
    Params = dpkit.NoParams

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        """The corpus."""
        return tiny_dataset("tiny_public", 80, 10, seed=100)


class TinyTopics(TinyPublic):
    """Tiny labelled corpus for the topic-classification metric."""

    name = "tiny_topics"

    def load(self) -> TextDataset:
        """The corpus."""
        return tiny_dataset("tiny_topics", 60, 30, seed=200)


SMALL = {"public_data": "tiny_public", "topic_data": "tiny_topics", "vocab_size": 40,
         "min_count": 1, "dim": 8, "window": 2, "epochs": 2, "workers": 1, "heldout_pairs": 500}
TEACHER = dict(SMALL, teachers=4, num_queries=24, student_epochs=3, threshold_votes=0.2)


@pytest.fixture
def make_ctx(tmp_path):
    """Factory of run contexts over a tiny private corpus (fresh ledger each call)."""

    def build(private: TextDataset | None = None, accountant: str = "rdp", seed: int = 0):
        reg = Registry()
        reg.add("dataset", TinyPublic, "tests")
        reg.add("dataset", TinyTopics, "tests")
        return RunContext(
            connect=connector("inprocess"), dataset=private or tiny_dataset("tiny_private", 120, 30, seed=0),
                          model=None, device=torch.device("cpu"), seed=seed,
                          ledger=Ledger(1e-5, accountant), registry=reg,
                          cache_dir=tmp_path / "cache")

    return build


def teachers_changed_by_one_document(make_ctx, params, n_train: int = 120) -> tuple[list[bool], list]:
    """Which teachers stay identical when the last private training document is removed, and the
    teachers of the full corpus."""
    from dpkit_dped.pipeline import prepare, teacher_models

    base = tiny_dataset("p", n_train, 30, seed=0)
    fewer = TextDataset("p", {"train": TextSplit(list(base["train"].texts)[:-1]), "test": base["test"]})
    models = []
    for data in (base, fewer):
        ctx = make_ctx(data)
        models.append(teacher_models(ctx, prepare(ctx, params), params))
    same = [torch.equal(a.vectors, b.vectors) and torch.equal(a.out_vectors, b.out_vectors)
            for a, b in zip(*models)]
    return same, models[0]
