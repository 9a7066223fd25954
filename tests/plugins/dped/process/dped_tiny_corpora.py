"""The DPED tests' tiny public and topic corpora as a plug-in module, so that a server in its own
process can load them by name (the test puts this folder on ``sys.path``)."""

from __future__ import annotations

import numpy as np

import dpkit
from dpkit.contract.hookspecs import hookimpl
from dpkit.data.types import TextDataset, TextSplit

TOPICS = (("cat", "dog", "horse", "cow", "sheep", "bird", "fish", "mouse"),
          ("car", "train", "plane", "bus", "truck", "boat", "bike", "ship"),
          ("red", "blue", "green", "yellow", "black", "white", "brown", "pink"))
FILLER = ("the", "a", "of", "and", "is", "in", "to", "it")


def corpus(name: str, n_train: int, n_test: int, seed: int) -> TextDataset:
    """Documents mixing filler words with the words of one topic, labelled by topic."""
    splits = {}
    for split, n, s in (("train", n_train, seed), ("test", n_test, seed + 1)):
        rng = np.random.default_rng(s)
        texts, labels = [], []
        for _ in range(n):
            topic = int(rng.integers(len(TOPICS)))
            texts.append(" ".join(TOPICS[topic][rng.integers(8)] if rng.random() < 0.6
                                  else FILLER[rng.integers(8)] for _ in range(40)))
            labels.append(topic)
        splits[split] = TextSplit(texts, labels)
    return TextDataset(name, splits, label_names=("animals", "vehicles", "colours"))


class ProcessPublic:
    """Tiny public corpus."""

    name = "dped_process_public"
    Params = dpkit.NoParams

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        """The corpus."""
        return corpus(self.name, 80, 10, seed=100)


class ProcessTopics(ProcessPublic):
    """Tiny labelled corpus for the topic metric."""

    name = "dped_process_topics"

    def load(self) -> TextDataset:
        """The corpus."""
        return corpus(self.name, 60, 30, seed=200)


@hookimpl
def dpkit_register_datasets(register):
    """The two corpora."""
    register(ProcessPublic)
    register(ProcessTopics)
