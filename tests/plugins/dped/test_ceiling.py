"""Without noise a distilled student must approach its teachers: DPED's and PATE's noiseless
students end within 10 % of the teacher ensemble's perplexity, and the check would have caught the
hard-argmax defect (labels that are a hub word for most queries)."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.references import DpedEnsemble

from dpkit.accounting import Ledger, NoGuarantee
from dpkit.contract.context import RunContext
from dpkit.boundary.session import connector
from dpkit.contract.registry import Registry

from .conftest import TEACHER, TinyPublic, TinyTopics, tiny_dataset

# teachers that learn something: 400 documents, 20 epochs (2 epochs leave them uniform)
NOISELESS = {**TEACHER, "epochs": 20, "num_queries": 32, "heldout_pairs": 2000, "noiseless": True,
             "threshold_votes": 0.0, "student_init": "public", "student_epochs": 60,
             "student_patience": 3, "student_holdout_share": 0.35}
# a third of the 32 queries held out: a signed-rank test over n answers and m epochs can reach
# p = m / 2**n at best, so keeping any epoch needs n ≥ log2(m / 0.05) ≈ 8 answers
# the former default, trained for every epoch: the held-out selection (issue 39) may keep such a
# student at its public start, which on this tiny corpus is already as good as the ensemble
OLD_DEFAULT = {"target": "hard", "threshold_votes": 1.0, "shrinkage": "none",
               "hidden_target": "released", "student_patience": None}
CEILING = 1.10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Run a defense on the shared tiny corpus (teachers trained once, cached on disk)."""
    cache = tmp_path_factory.mktemp("ceiling")

    def go(cls, params):
        reg = Registry()
        reg.add("dataset", TinyPublic, "tests")
        reg.add("dataset", TinyTopics, "tests")
        ctx = RunContext(
            connect=connector("inprocess"), dataset=tiny_dataset("tiny_private", 400, 30, seed=0), model=None,
                         device=torch.device("cpu"), seed=0, ledger=Ledger(1e-5), registry=reg,
                         cache_dir=cache)
        fields = cls.Params.model_fields
        metrics = cls(cls.Params.model_validate({k: v for k, v in params.items() if k in fields})
                      ).run(ctx).metrics
        return metrics, ctx.ledger

    return go


@pytest.fixture(scope="module")
def ensemble(run):
    metrics, ledger = run(DpedEnsemble, NOISELESS)
    assert math.isinf(ledger.epsilon())
    return metrics["perplexity"]


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate], ids=["dped", "pate"])
def test_noiseless_student_ends_within_ten_percent_of_the_ensemble(run, ensemble, cls):
    metrics, ledger = run(cls, NOISELESS)
    assert metrics["perplexity"] <= CEILING * ensemble, (metrics["perplexity"], ensemble)
    assert math.isinf(ledger.epsilon())
    channels = 3 if cls is DpedDefense else 2  # threshold, outputs (and DPED's hidden means)
    assert [type(s.guarantee) for s in ledger.spends] == [NoGuarantee] * channels


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate], ids=["dped", "pate"])
def test_the_ceiling_check_catches_hard_argmax_labels(run, ensemble, cls):
    """The former default (noisy-argmax labels, Alg. 1 read literally) fails the same check."""
    metrics, _ = run(cls, {**NOISELESS, **OLD_DEFAULT})
    assert metrics["perplexity"] > CEILING * ensemble, (metrics["perplexity"], ensemble)


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate], ids=["dped", "pate"])
def test_under_heavy_noise_the_student_keeps_its_public_start(run, cls):
    """Targets shrunk all the way to the public model's predictions train nothing: the student is
    the floor exactly, never above it."""
    from dpkit_dped.references import DpedPublic

    floor, _ = run(DpedPublic, NOISELESS)
    metrics, ledger = run(cls, {**NOISELESS, "noiseless": False, "target_epsilon": 1.0})
    assert ledger.epsilon() <= 1.0
    assert metrics["informative_outputs"] == metrics["informative_hidden"] == 0
    assert metrics["perplexity"] == floor["perplexity"]


@pytest.mark.parametrize("cls", [DpedDefense, DpedPate], ids=["dped", "pate"])
def test_from_a_random_start_the_noiseless_student_climbs_to_the_ceiling(run, ensemble, cls):
    """On this corpus the public model is already near the ensemble (23.1 against 23.5), so a
    student that kept its public start would pass the check above; from a random (uniform) start
    it must learn to pass. Fixed epochs: from a uniform start Eq. 4's squared loss moves too
    slowly for patience 3 to see a gain on 11 held-out answers."""
    # under ε = 1 every target shrinks to the start's prediction: the student stays at its start
    start, _ = run(cls, {**NOISELESS, "student_init": "random", "noiseless": False,
                         "target_epsilon": 1.0})
    assert start["perplexity"] > 1.2 * ensemble, (start["perplexity"], ensemble)
    metrics, _ = run(cls, {**NOISELESS, "student_init": "random", "student_patience": None})
    assert metrics["perplexity"] <= CEILING * ensemble, (metrics["perplexity"], ensemble)
