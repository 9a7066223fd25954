"""HiddenEcho on the real sources of its spec: MiniLM and Rotten Tomatoes (fetched into DPKIT_CACHE),
with the server in its own process loading MiniLM by name."""

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.boundary.session import connector
from dpkit.contract.context import RunContext, load_component
from dpkit.contract.plugins import get_registry
from dpkit.testing.boundary import attack_metrics

pytestmark = pytest.mark.network


def test_hiddenecho_runs_on_minilm_and_rotten_tomatoes():
    registry = get_registry()
    cpu = torch.device("cpu")
    model = load_component(registry, "model", "minilm", {}, cpu)
    data = load_component(registry, "dataset", "rotten_tomatoes", {"max_examples": 40}, cpu)
    ctx = RunContext(dataset=data, model=model, device=cpu, seed=0, ledger=Ledger(),
                     registry=registry, model_ref={"name": "minilm", "params": {}},
                     connect=connector("process"))
    params = {"eta": 60.0, "epochs": 1, "batch_size": 8, "max_length": 16, "train_examples": 8,
              "test_examples": 8, "lora_layers": 1, "ig_samples": 2, "ig_steps": 2,
              "mine_tokens": 32, "attack_tokens": 50}
    try:
        result = registry.build("defense", "hiddenecho", params).run(ctx)
        m = result.metrics
        assert m["layers_sent"] == 2 and m["width_sent"] == 384 // 8
        assert result.truth["token_ids"].shape == (50,)
        top1 = attack_metrics(ctx, result, "nn_inversion", {"ks": [1]})["inversion_top1"]
        assert top1 == pytest.approx(1.0 - m["ep"])  # the server's rows are the ones sent
        assert ctx.ledger.spends[0].guarantee.space == "minilm"
        assert m["epoch_server_cpu_seconds"] > 0  # the server worked in its own process
        assert result.wire_bytes["train_down_embeddings"] == m["bytes_down_per_batch_train"]
    finally:
        ctx.wire.channel().close()
