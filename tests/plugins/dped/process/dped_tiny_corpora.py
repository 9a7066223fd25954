"""The DPED tests' tiny generated corpora (``tests/plugins/dped/conftest.py`` imports them) and
its public and topic corpora as a plug-in module, so that a server in its own process can load
them by name (``test_process.py`` puts this folder on ``sys.path``)."""

from __future__ import annotations

import numpy as np

import dpkit
from dpkit.contract.hookspecs import hookimpl
from dpkit.data.types import TextDataset, TextSplit

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


class ProcessPublic:
    """Tiny public corpus."""

    name = "dped_process_public"
    Params = dpkit.NoParams

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        """The corpus."""
        return tiny_dataset(self.name, 80, 10, seed=100)


class ProcessTopics(ProcessPublic):
    """Tiny labelled corpus for the topic metric."""

    name = "dped_process_topics"

    def load(self) -> TextDataset:
        """The corpus."""
        return tiny_dataset(self.name, 60, 30, seed=200)


@hookimpl
def dpkit_register_datasets(register):
    """The two corpora."""
    register(ProcessPublic)
    register(ProcessTopics)
