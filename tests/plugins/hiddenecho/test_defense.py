"""End-to-end smoke of hiddenecho / hiddenecho_full / hiddenecho_ldp on a tiny encoder, with the
server part behind the wire (in this process, bytes both ways; see test_boundary.py for its own
process)."""

import math
import random

import pytest
import torch

import dpkit
from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.base.errors import BudgetExceededError
from dpkit.boundary.session import connector
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry
from dpkit.data.types import TextDataset, TextSplit
from dpkit.models import tiny_encoder
from dpkit.testing import DefenseContract
from dpkit.testing.boundary import server_of, server_view
from dpkit.testing.params_contract import register_test_model, tiny_context

POS, NEG = ["good", "great", "love", "fresh"], ["bad", "hate", "rotten", "plot"]
FILLER = ["the", "movie", "film", "story", "actor", "was", "a", "and", "it"]
SMALL = {"eta": 40.0, "epochs": 1, "batch_size": 16, "train_examples": 32, "test_examples": 16,
         "lora_rank": 2}
HE = {**SMALL, "reduction_factor": 4, "denoiser_heads": 2, "ig_samples": 4, "ig_steps": 2,
      "mine_tokens": 32}


def toy_dataset(n=48, seed=0):
    rng = random.Random(seed)
    labels = [i % 2 for i in range(n)]
    docs = []
    for y in labels:
        words = [rng.choice(FILLER) for _ in range(6)] + [rng.choice(POS if y else NEG)] * 2
        rng.shuffle(words)
        docs.append(" ".join(words))
    return TextDataset("toy_sentiment", {"train": TextSplit(docs[:32], labels[:32]),
                                         "test": TextSplit(docs[32:], labels[32:])}, ("neg", "pos"))


@pytest.fixture(scope="module")
def setup():
    return get_registry(), toy_dataset(), tiny_encoder(32, 3, 2, 0)


def context(registry, dataset, model, ledger=None, seed=0, server="inprocess", model_ref=None):
    """A run context whose server (``inprocess``, or ``process``: its own process, which loads
    ``model_ref`` by name) is built by the runner's connector."""
    ledger = ledger if ledger is not None else Ledger()
    return RunContext(dataset=dataset, model=model, device=torch.device("cpu"), seed=seed,
                      ledger=ledger, registry=registry,
                      model_ref=model_ref or register_test_model(registry, model),
                      connect=connector(server))


def run(setup, name, params, ledger=None, **kwargs):
    registry, dataset, model = setup
    ctx = context(registry, dataset, model, ledger, **kwargs)
    return registry.build("defense", name, params).run(ctx), ctx


def test_hiddenecho_trains_meters_and_spends(setup):
    before = {k: v.clone() for k, v in setup[2].server.state_dict().items()}
    result, ctx = run(setup, "hiddenecho", HE)
    m = result.metrics
    assert 0.0 <= m["auc"] <= 1.0 and 0.0 <= m["ep"] <= 1.0 and m["epoch_cpu_seconds"] > 0
    assert m["layers_sent"] == 2 and m["width_sent"] == 8
    spends = ctx.ledger.spends
    assert len(spends) == 3 and spends[0].count == m["tokens_privatized"]
    assert spends[0].guarantee == MetricDpGuarantee(40.0, "l2", setup[2].name, "token")
    # 32 training texts, 3 held out, batches of 16 for 1 epoch: 2 steps of gradients, uncovered
    assert spends[1].count == 2 and "gradients" in spends[1].guarantee.reason
    assert spends[2].count == 1 and "training steps" in spends[2].guarantee.reason
    assert ctx.ledger.summary()["epsilon"] == float("inf") and ctx.ledger.eta_per_token() == 40.0
    # every real row of every split crossed once (reused rows are free), none beyond
    assert ctx.wire.units["embeddings"] == m["tokens_privatized"]
    wire = result.wire_bytes
    assert wire["total"] == sum(v for k, v in wire.items() if k != "total")
    assert wire["train_up_gradients"] == wire["train_down_embeddings"]  # both states trained
    view = server_view(ctx)
    truth = result.truth["token_ids"]
    assert view["embeddings"].shape == (truth.numel(), 32)
    assert not torch.isin(truth, setup[2].special_token_ids()).any()
    after = setup[2].server.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "the shared model was modified"


def test_full_sends_more_bytes_than_hiddenecho_and_ldp_sends_one_layer(setup):
    he, _ = run(setup, "hiddenecho", HE)
    full, _ = run(setup, "hiddenecho_full", {**HE, "reduction_factor": 4})
    ldp, _ = run(setup, "hiddenecho_ldp", SMALL)
    assert full.metrics["layers_sent"] == 3 and full.metrics["width_sent"] == 32
    assert ldp.metrics["layers_sent"] == 1 and ldp.metrics["lowest_layer_sent"] == 2
    assert full.metrics["lowest_layer_sent"] == 0
    down = "bytes_down_per_batch_eval"
    assert he.metrics[down] * 4 * 3 == pytest.approx(full.metrics[down] * 2)  # 2·d/4 vs 3·d
    assert ldp.metrics["ep"] == he.metrics["ep"]  # same noise stream, same transmitted embeddings


def test_ablations_are_params(setup):
    res, _ = run(setup, "hiddenecho", {**HE, "layers": "fixed", "reduction": "linear",
                                       "residual": False})
    assert res.metrics["layers_sent"] == 2 and res.metrics["width_sent"] == 8
    assert "layer_filter_up_embeddings" not in res.wire_bytes  # fixed layers: no filter samples
    with pytest.raises(dpkit.base.errors.ParamsError, match="reduction"):
        setup[0].build("defense", "hiddenecho_full", {"eta": 1.0, "reduction": "ib"})


def test_budget_ceiling_refuses_before_any_noise(setup, monkeypatch):
    from dpkit_hiddenecho import defense

    def fail(*args, **kwargs):
        raise AssertionError("noise was drawn before the ledger accepted the spend")

    monkeypatch.setattr(defense, "privatize_split", fail)
    with pytest.raises(BudgetExceededError):
        run(setup, "hiddenecho_ldp", SMALL, Ledger(ceiling={"eta": 100.0}))


def test_learning_rate_warms_up_then_decays_to_zero():
    from dpkit_hiddenecho.fine_tune import warmup_then_decay

    factor = warmup_then_decay(100, 0.1)
    rates = [factor(step) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(rates[:10], rates[1:10]))
    assert all(a >= b for a, b in zip(rates[9:], rates[10:]))
    assert rates[-1] == pytest.approx(1 / 90) and warmup_then_decay(5, 0.0)(0) == 1.0


def test_the_server_schedule_follows_the_step_count_the_client_sent(setup):
    result, ctx = run(setup, "hiddenecho", {**HE, "epochs": 3})
    server = server_of(ctx)
    # 29 training texts in batches of 16: 2 steps an epoch, 6 in all; the rate ends at 0
    assert server.schedule.last_epoch == 6
    assert server.optimizer.param_groups[0]["lr"] == pytest.approx(0.0)
    assert result.wire_bytes["setup_up_schedule"] == 8  # one int64 before training


def test_runs_on_a_causal_decoder_with_last_token_pooling():
    from dpkit.models import tiny_causal

    model = tiny_causal(32, 3, 2, 0)
    result, _ = run((get_registry(), toy_dataset(), model), "hiddenecho", HE)
    m = result.metrics
    assert m["layers_sent"] == 2 and m["width_sent"] == 8 and 0.0 <= m["auc"] <= 1.0
    assert result.wire_bytes["train_up_gradients"] > 0  # LoRA found the decoder's projections


@pytest.mark.parametrize("name,params", [
    ("hiddenecho", HE), ("hiddenecho_full", {**HE, "reduction_factor": 4}),
    ("hiddenecho_ldp", SMALL)])
def test_a_bf16_cell_is_close_to_fp32_and_sends_and_spends_the_same(setup, name, params):
    cells = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        cells[precision] = run(setup, name, {**params, "epochs": 2, "lora_layers": 2,
                                             "precision": precision})
    (fp32, fp32_ctx), (bf16, bf16_ctx) = cells["fp32"], cells["bf16"]
    curve, reference = bf16.training_curves[0], fp32.training_curves[0]
    losses = curve["train_loss"] + curve["val_loss"]
    assert all(math.isfinite(x) for x in losses) and math.isfinite(bf16.metrics["auc"])
    # rounding of the body only: a few 1e-5 on the tiny encoder, and not nothing
    assert losses != reference["train_loss"] + reference["val_loss"]
    torch.testing.assert_close(losses, reference["train_loss"] + reference["val_loss"],
                               atol=1e-3, rtol=0)
    assert bf16.metrics["auc"] == pytest.approx(fp32.metrics["auc"], abs=0.05)
    # the wire and the ledger do not see the precision
    assert bf16.wire_bytes == fp32.wire_bytes
    assert {k: v for k, v in bf16.metrics.items() if "bytes" in k or k == "ep"} == {
        k: v for k, v in fp32.metrics.items() if "bytes" in k or k == "ep"}
    assert bf16_ctx.ledger.summary() == fp32_ctx.ledger.summary()
    assert bf16_ctx.ledger.spends == fp32_ctx.ledger.spends
    seen, seen_fp32 = server_view(bf16_ctx)["embeddings"], server_view(fp32_ctx)["embeddings"]
    assert seen.dtype == torch.float32
    torch.testing.assert_close(seen, seen_fp32, atol=0, rtol=0)


class TestHiddenEchoContract(DefenseContract):
    defense = "hiddenecho"
    params = HE
    invalid_params = [{**HE, "eta": -1.0}, {**HE, "reduction": "pca"}]

    def make_context(self):
        return tiny_context(tiny_encoder(32, 3, 2, 0), toy_dataset())


class TestHiddenEchoLdpContract(TestHiddenEchoContract):
    defense = "hiddenecho_ldp"
    params = SMALL
    invalid_params = [{**SMALL, "epochs": 0}]
