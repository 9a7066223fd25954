"""Tiny generated corpora and a run context for the DPED tests (no downloads)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.boundary.session import connector
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.registry import Registry

sys.path.insert(0, str(Path(__file__).parent / "process"))  # a plain module: servers load it too
from dped_tiny_corpora import (  # noqa: E402, F401 (make_texts: used by tests)
    ProcessPublic,
    ProcessTopics,
    make_texts,
    tiny_dataset,
)


class TinyPublic(ProcessPublic):
    """Tiny public corpus."""

    name = "tiny_public"


class TinyTopics(ProcessTopics):
    """Tiny labelled corpus for the topic-classification metric."""

    name = "tiny_topics"


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
