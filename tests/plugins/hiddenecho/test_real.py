"""HiddenEcho on the real sources of its spec: MiniLM and Rotten Tomatoes (fetched into DPKIT_CACHE)."""

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext, load_component
from dpkit.contract.plugins import get_registry

pytestmark = pytest.mark.network


def test_hiddenecho_runs_on_minilm_and_rotten_tomatoes():
    registry = get_registry()
    cpu = torch.device("cpu")
    model = load_component(registry, "model", "minilm", {}, cpu)
    data = load_component(registry, "dataset", "rotten_tomatoes", {"max_examples": 40}, cpu)
    ctx = RunContext(dataset=data, model=model, device=cpu, seed=0, ledger=Ledger(),
                     registry=registry)
    params = {"eta": 60.0, "epochs": 1, "batch_size": 8, "max_length": 16, "train_examples": 8,
              "test_examples": 8, "lora_layers": 1, "ig_samples": 2, "ig_steps": 2,
              "mine_tokens": 32, "attack_tokens": 50}
    result = registry.build("defense", "hiddenecho", params).run(ctx)
    m = result.metrics
    assert m["layers_sent"] == 2 and m["width_sent"] == 384 // 8
    assert result.view.knowledge["space"].size == 30522
    assert result.view.observed["embeddings"].shape == (50, 384)
    assert ctx.ledger.spends[0].guarantee.space == "minilm"
    assert result.wire_bytes["train_down_hidden_states"] == m["bytes_down_per_batch_train"]
