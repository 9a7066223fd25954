"""Generic attacks: k-NN recovery, Pr@k of substitutes, KL entropy / mutual information, attributes."""

import math

import torch

from dpkit.contract.attacks import run_attack
from dpkit.contract.context import AttackContext
from dpkit.release.view import ServerView
from dpkit.testing.strategies_tokens import random_space
from dpkit_attacks.attribute import AttributeInference, attribute_inference
from dpkit_attacks.inversion import NNInversion, TokenRecovery, substitute_recovery


CTX = AttackContext(torch.device("cpu"), seed=0)


def test_clean_embeddings_are_fully_inverted_and_oov_skipped():
    space = random_space(30, 6, 2)
    truth = torch.tensor([3, -1, 7, 29])
    view = ServerView(observed={"embeddings": torch.cat([space.vectors[[3]], torch.zeros(1, 6),
                                                         space.vectors[[7, 29]]])},
                      knowledge={"space": space}, truth={"token_ids": truth})
    out = run_attack(NNInversion(NNInversion.Params()), view, CTX)
    assert out == {"inversion_top1": 1.0, "inversion_top5": 1.0}


def test_token_recovery_pr_at_k():
    space = random_space(30, 4, 3)
    truth = torch.arange(30)
    nearest_other = torch.cdist(space.vectors, space.vectors).argsort(1)[:, 1]
    rates = substitute_recovery(nearest_other, truth, space, (1, 2))
    ranks = torch.cdist(space.vectors, space.vectors).argsort(1)
    mutual = (ranks[nearest_other, 1] == truth).float().mean()
    assert rates[1] == 0.0 and math.isclose(rates[2], float(mutual))
    view = ServerView(observed={"substituted_ids": truth}, knowledge={"space": space},
                      truth={"token_ids": truth})
    assert run_attack(TokenRecovery(TokenRecovery.Params(ks=(1, 5))), view, CTX) == {
        "recovery_at1": 1.0, "recovery_at5": 1.0}


def test_attribute_inference_learns_signal_and_not_noise():
    g = torch.Generator().manual_seed(2)
    y = torch.randint(0, 2, (400,), generator=g)
    x = torch.randn(400, 8, generator=g) + 3.0 * y[:, None].float()
    good = attribute_inference(x[:200], y[:200], x[200:], y[200:], generator=g, hidden=16, epochs=40)
    assert good["attribute_accuracy"] > 0.95
    noise = torch.randn(400, 8, generator=g)
    bad = attribute_inference(noise[:200], y[:200], noise[200:], y[200:], generator=g, hidden=16,
                              epochs=40)
    assert bad["attribute_accuracy"] < 0.65
    view = ServerView(observed={"representations": x}, truth={"attributes": y.tolist()})
    out = run_attack(AttributeInference(AttributeInference.Params(hidden=16, epochs=40)), view, CTX)
    assert out["attribute_accuracy"] > 0.9 and 0.3 < out["attribute_majority"] < 0.7
