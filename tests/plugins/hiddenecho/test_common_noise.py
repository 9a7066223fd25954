"""HiddenEcho, its LDP / Full variants and ablations share one noise draw; η = ∞ is the ceiling."""

import math

import dpkit_hiddenecho.defense as defense
import pytest
import torch

from dpkit.accounting import NoGuarantee
from dpkit.contract.plugins import get_registry
from dpkit.models import tiny_encoder
from dpkit.testing.boundary import attack_metrics
from dpkit.testing.params_contract import tiny_context
from dpkit.testing.textdata import generated_dataset as dataset

SMALL = {"epochs": 1, "batch_size": 16, "train_examples": 32, "test_examples": 16,
         "lora_rank": 2}
HE = {**SMALL, "reduction_factor": 4, "denoiser_heads": 2, "ig_samples": 4, "ig_steps": 2,
      "mine_tokens": 32}


@pytest.fixture(scope="module")
def model():
    return tiny_encoder(32, 3, 2, 0)


def run(model, data, name, params, seed=0, monkeypatch=None):
    """Run a defense; with ``monkeypatch``, also return every noisy split it drew."""
    drawn = []
    if monkeypatch is not None:
        original = defense.privatize_split

        def record(*args, **kwargs):
            out = original(*args, **kwargs)
            drawn.append([t.clone() for t in out.noisy])
            return out

        monkeypatch.setattr(defense, "privatize_split", record)
    registry = get_registry()
    ctx = tiny_context(model, data, registry=registry, seed=seed)
    result = registry.build("defense", name, params).run(ctx)
    if monkeypatch is not None:
        monkeypatch.undo()
    return result, ctx, drawn


def test_the_family_sends_bit_identical_noisy_embeddings_for_one_seed(model, monkeypatch):
    data = dataset(32, 16)
    family = {"hiddenecho": HE, "hiddenecho_ldp": SMALL, "hiddenecho_full": HE,
              "hiddenecho -Res": {**HE, "residual": False}}
    drawn, spends = {}, {}
    for label, params in family.items():
        _, ctx, noisy = run(model, data, label.split()[0], {**params, "eta": 40.0},
                            monkeypatch=monkeypatch)
        drawn[label] = [t for split in noisy for t in split]  # train rows, then test rows
        spends[label] = [(s.guarantee, s.count) for s in ctx.ledger.spends][:1]
    first = drawn["hiddenecho"]
    assert len(first) == 48
    for label, rows in drawn.items():
        assert len(rows) == len(first) and all(torch.equal(a, b) for a, b in zip(rows, first)), label
        assert spends[label] == spends["hiddenecho"], label  # the same η per token, same count
    _, _, other = run(model, data, "hiddenecho_ldp", {**SMALL, "eta": 40.0}, seed=1,
                      monkeypatch=monkeypatch)
    assert not torch.equal(other[0][0], first[0])  # another seed, another draw


def test_noiseless_hiddenecho_reaches_the_non_private_reference(model):
    """η = ∞: clean embeddings go up (ε = ∞ on the ledger); HiddenEcho's corrected fine-tuning
    then scores at least what plain split fine-tuning without noise (LDP at η = ∞) scores."""
    data = dataset(96, 48)
    longer = {"epochs": 8, "lr": 0.01, "lora_lr": 0.005, "train_examples": 96,
              "test_examples": 48}
    ceiling, ctx, _ = run(model, data, "hiddenecho", {**HE, **longer, "eta": math.inf})
    reference, _, _ = run(model, data, "hiddenecho_ldp", {**SMALL, **longer, "eta": math.inf})
    noisy, _, _ = run(model, data, "hiddenecho", {**HE, **longer, "eta": 2.0})
    embeddings = ctx.ledger.spends[0].guarantee
    assert isinstance(embeddings, NoGuarantee) and "η = ∞" in embeddings.reason
    assert ceiling.metrics["ep"] == 0.0  # every sent token is its own nearest neighbour
    # the attack, where the server is, inverts every row it kept: the truth lists them in order
    assert attack_metrics(ctx, ceiling, "nn_inversion", {"ks": [1]})["inversion_top1"] == 1.0
    assert reference.metrics["auc"] > 0.8  # the task is learnt without noise (measured 0.87)
    assert ceiling.metrics["auc"] >= reference.metrics["auc"] - 0.05  # measured 0.998
    assert noisy.metrics["auc"] < ceiling.metrics["auc"] - 0.2  # measured 0.48 at η = 2
