"""privatize_text on the real sources: Rotten Tomatoes snippets through GloVe 6B 50-d."""

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry
from dpkit.testing.boundary import attack_metrics
from dpkit.testing.params_contract import tiny_context

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def real():
    registry = get_registry()
    ctx_args = dict(registry=registry, device=torch.device("cpu"), seed=0)
    space = RunContext(dataset=None, model=None, ledger=Ledger(), **ctx_args).load_model(
        "glove-6b-50d", {"max_vocab": 20000})
    data = RunContext(dataset=None, model=None, ledger=Ledger(), **ctx_args).load_dataset(
        "rotten_tomatoes", {"max_examples": 80})
    return space, data, ctx_args


def run(real, mechanism, params, **task):
    space, data, ctx_args = real
    ctx = tiny_context(space, data, registry=ctx_args["registry"],
                       model_ref={"name": "glove-6b-50d", "params": {"max_vocab": 20000}},
                       server="process")  # the real boundary, the real public model by name
    defense = ctx.build("defense", "privatize_text",
                        {"mechanism": mechanism, "mechanism_params": params, "max_docs": 40, **task})
    result = defense.run(ctx)
    for name in ("nn_inversion", "token_recovery"):
        result.metrics.update(attack_metrics(ctx, result, name))
    return result.metrics, ctx.ledger


def test_laplace_on_glove_preservation_grows_with_eta(real):
    low, ledger = run(real, "laplace_dx", {"eta": 2.0})
    high, _ = run(real, "laplace_dx", {"eta": 200.0}, utility="classifier")
    assert low["token_preservation"] < 0.2 < 0.9 < high["token_preservation"]
    assert high["inversion_top1"] == pytest.approx(high["token_preservation"], abs=0.02)
    assert abs(high["accuracy"] - high["clean_accuracy"]) < 0.1
    assert ledger.summary()["eta"] == pytest.approx(2.0 * low["n_tokens"])


def test_dx_stencil_and_custext_plus_on_glove(real):
    metrics, ledger = run(real, "dx_stencil", {"eta": 5.0, "window": 4})
    assert 0.0 <= metrics["recovery_at5"] <= 1.0 and metrics["n_docs"] == 40
    assert any(s.guarantee.notion == "metric_dp" and s.count == 40 for s in ledger.spends)
