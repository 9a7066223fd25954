"""HiddenEcho's server behind the process boundary: built from public inputs, fed only bytes.

Cases of my own beyond issue 41's list: the server in its own process gives the in-process
result bit for bit (it needs nothing but what crossed and the model loaded by name); what the
server keeps is exactly the noisy rows the client sent (no clean row, no special token), in the
order the truth lists them; clean rows hidden in the padding are counted, not waved through; and
messages out of protocol order are refused with a clear error.
"""

import pytest
import torch

from dpkit.base.errors import AccountingError, ServerError
from dpkit.contract.context import load_component
from dpkit.contract.plugins import get_registry
from dpkit.contract.releases import declare_releases
from dpkit.testing.boundary import attack_metrics, server_of, server_view
from dpkit.testing.textdata import generated_dataset

from .test_defense import HE, context, toy_dataset

TINY = {"name": "tiny-encoder", "params": {"hidden_size": 32, "num_layers": 3, "num_heads": 2,
                                           "seed": 0}}
TRAINED = {**HE, "epochs": 2, "patience": 1, "lora_layers": 2, "attack_tokens": 40}


def named_model():
    return load_component(get_registry(), "model", TINY["name"], TINY["params"],
                          torch.device("cpu"))


def cell(server, name="hiddenecho", params=TRAINED, dataset=None, **kwargs):
    registry = get_registry()
    ctx = context(registry, dataset or toy_dataset(), named_model(), server=server,
                  model_ref=TINY, **kwargs)
    torch.manual_seed(0)
    return registry.build("defense", name, params).run(ctx), ctx


def untimed(metrics):
    return {k: v for k, v in metrics.items() if not k.endswith("seconds")}


def test_a_server_in_its_own_process_gives_the_in_process_result():
    here, here_ctx = cell("inprocess")
    apart, apart_ctx = cell("process")
    try:
        assert untimed(apart.metrics) == untimed(here.metrics)
        assert apart.wire_bytes == here.wire_bytes and apart.training_curves == here.training_curves
        assert torch.equal(apart.truth["token_ids"], here.truth["token_ids"])
        assert apart_ctx.ledger.spends == here_ctx.ledger.spends
        attack = {"ks": [1, 5]}
        assert attack_metrics(apart_ctx, apart, "nn_inversion", attack) == \
            attack_metrics(here_ctx, here, "nn_inversion", attack)
        assert apart.metrics["epoch_server_cpu_seconds"] > 0
        assert "epoch_server_cpu_seconds" not in here.metrics  # counted in the process's own
    finally:
        apart_ctx.wire.channel().close()


def test_the_server_keeps_exactly_the_noisy_rows_sent_in_truth_order(monkeypatch):
    from dpkit_hiddenecho import defense
    from dpkit_hiddenecho.layout import special_positions

    drawn = []
    original = defense.privatize_split

    def record(*args, **kwargs):
        out = original(*args, **kwargs)
        drawn.append(out)
        return out

    monkeypatch.setattr(defense, "privatize_split", record)
    result, ctx = cell("inprocess", params={**HE, "attack_tokens": 60})
    model, test = named_model(), drawn[1]
    lead, trail = special_positions(model.tokenizer)
    expected_rows = torch.cat([rows[lead:len(rows) - trail] for rows in test.noisy])[:60]
    expected_ids = torch.cat([ids[lead:len(ids) - trail] for ids in test.ids])[:60]
    kept = server_view(ctx)["embeddings"]
    assert torch.equal(kept, expected_rows)
    assert torch.equal(result.truth["token_ids"], expected_ids)
    clean = model.embedding_table
    assert torch.cdist(kept, clean).min() > 1e-3  # no clean token embedding among them


def test_clean_rows_hidden_in_the_padding_are_counted(monkeypatch):
    """A client that fills padding with something else than the declared zero rows (here: the
    clean [CLS] embedding) sends real rows: the wire counts them and the release goes over its
    declaration, an ∞ entry on the ledger."""
    from dpkit_hiddenecho import client as client_module

    model = named_model()
    pad = model.embedding_table[model.tokenizer.cls_token_id]
    monkeypatch.setattr(client_module, "zero_padding",
                        lambda noisy, mask: torch.where(mask.unsqueeze(-1), noisy, pad))
    texts = generated_dataset(32, 16)  # texts of 5 to 11 words: batches with padding
    _, ctx = cell("inprocess", params={**HE, "layers": "fixed"}, dataset=texts)
    declared = ctx.ledger.spends[0].count
    assert ctx.wire.units["embeddings"] > declared
    assert "embeddings (over declaration)" in [s.label for s in ctx.ledger.spends]


def test_messages_out_of_protocol_order_are_refused():
    registry = get_registry()
    ctx = context(registry, toy_dataset(), named_model(), model_ref=TINY)
    defense = registry.build("defense", "hiddenecho", {**HE, "layers": "fixed"})
    declare_releases(defense, ctx)
    wire = ctx.wire
    rows = torch.randn(2, 3, 32)
    wire.phase = "train"
    with pytest.raises(ServerError, match="before the schedule"):
        wire.send("embeddings", rows)
    with pytest.raises(ServerError, match="without a training forward"):
        wire.send("gradients", torch.zeros(1, 2, 3, 8))
    wire.phase = "setup"
    wire.send("schedule", torch.tensor([4]))
    wire.phase = "restore"
    with pytest.raises(ServerError, match="no parameters kept for epoch 3"):
        wire.send("schedule", torch.tensor([3]))
    wire.phase = "test"  # a phase every server takes, but not HiddenEcho's embeddings
    with pytest.raises(ServerError, match="phase 'test'"):
        wire.send("embeddings", rows)
    wire.phase = "somewhere"  # a phase the server never named: refused before it crosses
    with pytest.raises(AccountingError, match="phase 'somewhere' is not one the server takes"):
        wire.send("embeddings", rows)
    assert "embeddings" not in server_of(ctx).observed  # nothing kept from any of them
