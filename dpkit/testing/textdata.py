"""Tiny generated labelled text for tests of defenses and tasks (seconds, no downloads).

Also a plug-in module: registering it (``dpkit.contract.plugins.register_plugin(module, name)``) adds the
dataset ``generated_text``, which defenses that load public data by name can be pointed at.
"""

from __future__ import annotations

import random

from pydantic import Field

from dpkit.contract.component import Component
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params

POSITIVE = ("good", "great", "love", "fresh")
NEGATIVE = ("bad", "hate", "rotten")
FILLER = ("movie", "film", "story", "plot", "actor", "the", "a", "was", "and", "it", "this", "man",
          "woman", "food", "bread", "piece", "eating", "very", "not", "so")


def generated_texts(n: int, seed: int) -> tuple[list[str], list[int]]:
    """Short sentences whose label is whether they hold positive (1) or negative (0) words.

    Every word is in the tiny models' vocabulary (:mod:`dpkit.models.tiny`).
    """
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randrange(2)
        polar = POSITIVE if label else NEGATIVE
        words = rng.choices(FILLER, k=rng.randint(4, 9)) + rng.choices(polar, k=rng.randint(1, 3))
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def generated_dataset(n_train: int = 48, n_test: int = 24, seed: int = 0) -> TextDataset:
    """A two-class generated dataset with ``train`` and ``test`` splits."""
    train, test = generated_texts(n_train, seed), generated_texts(n_test, seed + 1)
    return TextDataset("generated", {"train": TextSplit(*train), "test": TextSplit(*test)},
                       label_names=("negative", "positive"))


class GeneratedText(Component):
    """The generated two-class dataset as a registered dataset (``generated_text``), for tests."""

    name = "generated_text"

    class Params(Params):
        n_train: int = Field(48, ge=2, le=10_000)
        n_test: int = Field(24, ge=2, le=10_000)
        seed: int = 0

    def load(self) -> TextDataset:
        """The generated dataset."""
        p = self.params
        return generated_dataset(p.n_train, p.n_test, p.seed)


@hookimpl
def dpkit_register_datasets(register):
    """Register ``generated_text`` (load with ``DPKIT_EXTRA_PLUGINS=testing_data=...``)."""
    register(GeneratedText)
