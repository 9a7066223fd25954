"""The noiseless ceiling: ObfusLM without WeightSynth (permutation only) must learn exactly what
plaintext fine-tuning learns, and the ledger must say that nothing is hidden."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_obfuslm.obfuscate import UNMIXED_REASON, obfuscate_tables

from dpkit.testing.boundary import attack_metrics
from tests.plugins.obfuslm.conftest import run_defense

TRAIN = {"epochs": 3, "batch_size": 32, "group_by_length": True}


def test_unmixed_tables_are_the_permuted_originals():
    table = torch.randn(300, 16, generator=torch.Generator().manual_seed(0))
    tables = obfuscate_tables(table, None, k=5, beta=0.5, epsilon=1.0, mix=False,
                              generator=torch.Generator().manual_seed(1))
    assert torch.equal(tables.embeddings[tables.key.forward], table)
    assert tables.guarantee().reason == UNMIXED_REASON and math.isinf(tables.epsilon)


def test_noiseless_obfuslm_reaches_the_plaintext_model(encoder, corpus):
    """Same seed, same batches, same head: the permuted model is the plaintext model with its
    rows renamed, so its curve and accuracy must match plaintext's. A wrong key (ids mapped one
    way, rows the other) or leftover mixing would change the curve."""
    plain, _ = run_defense("obfuslm_plaintext", TRAIN, encoder, corpus)
    ceiling, ctx = run_defense("obfuslm", {"k": 5, "beta": 0.9, "mix": False, **TRAIN}, encoder, corpus)
    mixed, _ = run_defense("obfuslm", {"k": 5, "beta": 0.9, "epsilon": 1.0, **TRAIN}, encoder, corpus)
    curve, reference = ceiling.training_curves[0], plain.training_curves[0]
    assert curve["train_loss"] == pytest.approx(reference["train_loss"], rel=1e-4)
    assert curve["val_loss"] == pytest.approx(reference["val_loss"], rel=1e-4)
    assert ceiling.metrics["accuracy"] == pytest.approx(plain.metrics["accuracy"], abs=1e-9)
    assert mixed.training_curves[0]["train_loss"] != pytest.approx(reference["train_loss"],
                                                                    rel=1e-3)
    (tables,) = [s for s in ctx.ledger.spends if s.label.startswith("obfuslm tables")]
    assert tables.guarantee.reason == UNMIXED_REASON
    assert attack_metrics(ctx, ceiling, "knn_plus")["knn_top1"] == 1.0
