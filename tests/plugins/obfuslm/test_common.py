"""ObfusLM's client step: what crosses the wire is the obfuscated model (never the plaintext
tables), declared with the guarantee of the tables actually made, the id stream's padding set."""

from __future__ import annotations

import math
import time

import dpkit_obfuslm.common as common
import pytest
import torch
from dpkit_obfuslm.common import (
    ID_PADDING,
    layer_params,
    obfuscate_model,
    padded_ids,
    releases,
    table_params,
    untied_head,
)
from dpkit_obfuslm.params import ObfuscationParams

from dpkit import KAnonymityGuarantee, NoGuarantee
from dpkit.models import tiny_causal, tiny_encoder
from dpkit.testing.params_contract import tiny_context


@pytest.fixture(scope="module")
def encoder():
    return tiny_encoder(hidden_size=16, num_layers=1)


@pytest.fixture(scope="module")
def causal():
    """A tiny causal LM whose LM head is its own matrix (untied from the input table)."""
    model = tiny_causal(hidden_size=16, num_layers=1)
    head = model.server.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach() + 0.5 * torch.randn(head.weight.shape,
                                     generator=torch.Generator().manual_seed(3)))
    return model


def obfuscated(model, seed=0, **params):
    """``obfuscate_model`` in a fresh CPU context: (tables, metrics, sent, the context)."""
    ctx = tiny_context(None, None, seed=seed)
    return (*obfuscate_model(ctx, model, ObfuscationParams(**params)), ctx)


def by_name(out):
    return {r.name: r for r in out}


# ---- releases: the declaration -------------------------------------------------------------

def test_the_plaintext_baseline_declares_its_real_ids_as_infinite_epsilon():
    for n_ids in (1, 37):
        out = by_name(releases(None, None, n_ids, 0))
        assert set(out) == {"token_ids"}
        ids = out["token_ids"]
        assert isinstance(ids.guarantee, NoGuarantee)
        assert ids.guarantee.reason == common.PLAINTEXT_REASON
        assert (ids.count, ids.unit, ids.padding) == (n_ids, "element", ID_PADDING)
        assert ids.label.startswith("obfuslm") and "plaintext" in ids.label  # names the defense
    assert by_name(releases(None, None, 0, 0))["token_ids"].count == 1


def test_obfuscated_tables_are_declared_with_the_guarantee_the_tables_hold(encoder):
    tables, *_ = obfuscated(encoder, k=3, epsilon=0.5)
    p = ObfuscationParams(k=3, epsilon=0.5)
    out = releases(tables, p, 41, 5)
    assert [r.name for r in out] == ["tables", "token_ids", "labels"]
    table, ids, labels = out
    assert table.guarantee == tables.guarantee()
    assert isinstance(table.guarantee, KAnonymityGuarantee) and table.guarantee.epsilon == 0.5
    assert (table.count, table.unit, table.padding) == (1, "send", None)
    assert table.label.startswith("obfuslm") and "k=3" in table.label and "eps=0.5" in table.label
    assert ids.guarantee.reason.endswith(common.IDS_REASON)
    assert (ids.count, ids.unit, ids.padding) == (41, "element", ID_PADDING)
    assert labels.guarantee.reason.endswith(common.LABELS_REASON) and labels.count == 5
    assert releases(tables, p, 1, 0)[1].count == 1
    assert releases(tables, p, 0, 0)[1].count == 1


def test_obfuslm_plus_declares_its_hidden_layers_as_uncovered(encoder):
    tables, *_ = obfuscated(encoder, k=3)
    out = by_name(releases(tables, ObfuscationParams(k=3, plus=True), 7, 0))
    assert set(out) == {"tables", "hidden_layers", "token_ids"}
    hidden = out["hidden_layers"]
    assert hidden.guarantee.reason.endswith(common.HIDDEN_REASON) and hidden.unit == "send"
    assert "labels" not in by_name(releases(None, None, 3, 0))
    assert by_name(releases(None, None, 3, 2))["labels"].count == 2


# ---- padded_ids: the id stream ---------------------------------------------------------------

def test_padding_positions_carry_the_declared_padding_and_nothing_else():
    ids = torch.tensor([[5, 0, 7, 9], [3, 4, 1, 2]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    sent = padded_ids(ids, mask)
    assert torch.equal(sent[mask == 1], ids[mask == 1])
    assert bool((sent[mask == 0] == ID_PADDING).all())
    assert bool((sent[mask == 1] >= 0).all())  # the wire tells real ids from padding by sign


def test_a_model_without_an_output_layer_has_no_untied_head():
    class Bare(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(5, 3)
            self.body = torch.nn.Linear(3, 3)

        def get_input_embeddings(self):
            return self.table

    bare = Bare()
    assert untied_head(bare) is None
    assert table_params(bare) == [bare.table.weight]
    assert layer_params(bare) == list(bare.body.parameters())


# ---- obfuscate_model: what is sent ----------------------------------------------------------

def test_an_encoder_sends_its_obfuscated_table_not_the_plaintext_one(encoder):
    tables, metrics, sent, _ = obfuscated(encoder, k=3, epsilon=0.5)
    assert set(sent) == {"tables"} and tables.head is None
    assert torch.equal(sent["tables"], tables.embeddings[None])
    plain = tables.key.permute_rows(encoder.embedding_table.float())
    assert not torch.allclose(sent["tables"][0], plain, atol=1e-3)
    assert tables.clusters.k_requested == 3 and tables.epsilon == 0.5


def test_the_tables_are_made_at_the_requested_parameters(encoder):
    faithful, *_ = obfuscated(encoder, k=3, calibration="faithful")
    assert faithful.epsilon == math.inf and isinstance(faithful.guarantee(), NoGuarantee)
    unmixed, _, sent, _ = obfuscated(encoder, k=3, mix=False)
    assert not unmixed.mixed
    plain = unmixed.key.permute_rows(encoder.embedding_table.float())
    torch.testing.assert_close(sent["tables"][0], plain)  # the noiseless ceiling: rows permuted
    tight, *_ = obfuscated(encoder, k=3, beta=0.0)
    loose, *_ = obfuscated(encoder, k=3, beta=0.99)
    assert not torch.equal(tight.clusters.labels, loose.clusters.labels)  # β reaches EmbedCluster


def test_a_causal_lm_sends_its_obfuscated_untied_head_with_its_table(causal):
    tables, _, sent, _ = obfuscated(causal, k=3)
    assert tables.head is not None and sent["tables"].shape[0] == 2
    assert torch.equal(sent["tables"][0], tables.embeddings)
    assert torch.equal(sent["tables"][1], tables.head)
    head = tables.key.permute_rows(causal.server.get_output_embeddings().weight.float())
    assert not torch.allclose(tables.head, head, atol=1e-3)


def test_sent_tables_take_the_models_dtype(encoder):
    half = tiny_encoder(hidden_size=16, num_layers=1)
    half.server.to(torch.bfloat16)
    tables, _, sent, _ = obfuscated(half, k=3)
    assert sent["tables"].dtype == torch.bfloat16
    assert torch.equal(sent["tables"][0], tables.embeddings.to(torch.bfloat16))


def test_the_obfuscation_noise_comes_from_the_runs_noise_secret(encoder):
    first, *_ = obfuscated(encoder, k=3)
    again, *_ = obfuscated(encoder, k=3)
    other, *_ = obfuscated(encoder, k=3, seed=1)
    assert torch.equal(first.embeddings, again.embeddings)
    assert not torch.equal(first.embeddings, other.embeddings)
    ctx = tiny_context(None, None)
    ctx.noise_secret = "another secret"
    tables, *_ = obfuscate_model(ctx, encoder, ObfuscationParams(k=3))
    assert not torch.equal(tables.embeddings, first.embeddings)


def test_obfuslm_plus_sends_a_transformed_copy_of_the_whole_model(encoder, monkeypatch):
    before = [q.detach().clone() for q in encoder.server.parameters()]
    asked = []
    hidden_key = common.hidden_key
    monkeypatch.setattr(common, "hidden_key", lambda *a, **kw: asked.append(kw) or hidden_key(*a, **kw))
    tables, metrics, sent, _ = obfuscated(encoder, k=3, beta=0.8, plus=True, k_star=4,
                                          epsilon_star=2.0)
    (kw,) = asked
    assert (kw["k"], kw["beta"], kw["epsilon"]) == (4, 0.8, 2.0)
    assert metrics["plus_epsilon"] == 2.0 == kw.get("epsilon")
    assert metrics["plus_k_achieved"] >= 1
    assert set(sent) == {"tables", "hidden_layers"}
    layers = layer_params(encoder.server)
    assert sent["hidden_layers"].shape == (sum(q.numel() for q in layers),)
    assert not torch.allclose(sent["hidden_layers"], torch.cat([q.detach().reshape(-1) for q in layers]))
    assert sent["tables"].shape == (len(table_params(encoder.server)), *tables.embeddings.shape)
    # the hidden dimension is mixed too: the sent table is not the obfuscated table as made
    assert not torch.allclose(sent["tables"][0], tables.embeddings, atol=1e-3)
    # the public model itself is left as it was (a copy is transformed)
    assert all(torch.equal(a, b) for a, b in zip(before, encoder.server.parameters()))


def test_obfuslm_plus_of_an_untied_lm_sends_table_and_head_as_tables_the_rest_as_layers(causal):
    server = causal.server
    table, head = server.get_input_embeddings().weight, server.get_output_embeddings().weight
    assert [id(t) for t in table_params(server)] == [id(table), id(head)]
    rest = sum(q.numel() for q in server.parameters()) - table.numel() - head.numel()
    assert sum(q.numel() for q in layer_params(server)) == rest
    tables, _, sent, _ = obfuscated(causal, k=3, plus=True, k_star=4)
    assert sent["tables"].shape == (2, *tables.embeddings.shape)
    assert sent["hidden_layers"].shape == (rest,)


def test_plus_metrics_report_the_hidden_clustering(encoder, monkeypatch):
    keys = []
    hidden_key = common.hidden_key
    monkeypatch.setattr(common, "hidden_key", lambda *a, **kw: keys.append(hidden_key(*a, **kw))
                        or keys[-1])
    _, metrics, _, _ = obfuscated(encoder, k=3, plus=True, k_star=5)
    assert metrics["plus_k_achieved"] == keys[0].clusters.k_achieved
    assert metrics["plus_epsilon"] == keys[0].epsilon


def test_progress_reports_the_rows_clusters_and_achieved_k(encoder):
    said = []
    ctx = tiny_context(None, None)
    ctx.progress = said.append
    tables, *_ = obfuscate_model(ctx, encoder, ObfuscationParams(k=3))
    (message,) = said
    assert message.startswith(f"obfuscated {encoder.vocab_size} rows into "
                              f"{tables.clusters.sizes.numel()} clusters")
    assert f"achieved k={tables.clusters.k_achieved}" in message


def test_metrics_describe_the_tables_made(encoder):
    started = time.perf_counter()
    tables, metrics, _, _ = obfuscated(encoder, k=3, epsilon=0.5)
    elapsed = time.perf_counter() - started
    sizes = tables.clusters.sizes.float()
    real = tables.weights.clusters.members >= 0
    assert metrics["k_achieved"] == tables.clusters.k_achieved
    assert metrics["share_below_k"] == tables.clusters.share_below_k
    assert metrics["anonymity_epsilon"] == tables.epsilon == 0.5
    assert metrics["clusters"] == sizes.numel()
    assert metrics["mean_cluster_size"] == pytest.approx(float(sizes.mean()))
    assert metrics["singleton_share"] == pytest.approx(float((sizes == 1).sum()) / len(real.flatten()
                                                        .nonzero()))
    assert metrics["mean_noise_scale"] == pytest.approx(float(tables.weights.noise_scale[real].mean()))
    assert metrics["paper_noise_scale"] == pytest.approx(float(tables.weights.paper_scale[real].mean()))
    assert 0.0 < metrics["obfuscate_s"] <= elapsed
