"""SnD on the real all-MiniLM-L6-v2 and real corpora (pinned artifacts, small sizes)."""

from __future__ import annotations

import math

import pytest

from dpkit.boundary.session import tally
from dpkit.testing.params_contract import tiny_context

pytestmark = pytest.mark.network


def test_snd_on_real_minilm_rotten_tomatoes_with_news_denoiser(registry, make_ctx, tmp_path):
    loader = make_ctx()
    model = loader.load_model("minilm", {})
    data = loader.load_dataset("rotten_tomatoes", {"max_examples": 200, "seed": 0})
    ctx = tiny_context(model, data, model_ref={"name": "minilm", "params": {}}, server="process",
                       registry=registry)  # the real boundary: the server loads MiniLM by name
    ctx.cache_dir = tmp_path / "cache"
    params = {"eta": 100.0, "max_tokens": 24, "train_examples": 32, "test_examples": 24,
              "batch_size": 32, "classifier_epochs": 3, "mi_tokens": 100, "view_tokens": 100,
              "eta_groups": [[100.0]],
              "denoiser": {"d_model": 64, "n_head": 2, "d_ff": 64, "n_layers": 1,
                           "public": {"name": "news_articles", "params": {"max_examples": 64}},
                           "public_examples": 32, "epochs": 1, "batch_size": 16}}
    res = registry.build("defense", "snd", params).run(ctx)
    table_max = float(model.embedding_table.norm(dim=1).max())
    assert res.metrics["clip_bound"] == pytest.approx(table_max) and 1.0 < table_max < 3.0
    assert all(math.isfinite(res.metrics[k]) for k in ("mse", "cosine", "accuracy", "mi"))
    kept = tally(ctx.wire.channel())
    assert kept["messages"] == {"embeddings": 2}  # one train batch, one test batch
    assert res.truth["token_ids"].shape == (100,)
    spend = ctx.ledger.spends[0]
    assert (spend.guarantee.eta, spend.guarantee.space) == (100.0, model.as_space().name)
    down = res.wire_bytes["train_down_embeddings"] + res.wire_bytes["test_down_embeddings"]
    assert down == (32 + 24) * 384 * 4
