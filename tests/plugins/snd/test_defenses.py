"""SnD and its baselines end to end on a tiny encoder: ledger, cache, views, metrics."""

from __future__ import annotations

import math

import pytest
import torch
from dpkit_snd.client import SplitClient
from safetensors.torch import load_file

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.testing.boundary import attack_metrics, server_view
from dpkit.base.errors import ParamsError

UTILITY = {"mse", "cosine", "accuracy", "auc", "token_corr"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One artifact cache for the whole module (the denoiser is trained once)."""
    return tmp_path_factory.mktemp("snd-cache")


def _run(registry, ctx, name, params):
    return registry.build("defense", name, params).run(ctx)


def test_ledger_entries_match_the_mechanism(registry, make_ctx, small):
    params, _ = small
    ctx = make_ctx()
    res = _run(registry, ctx, "tokembpriv", {**params, "eta": 40.0, "clip": True})
    client = SplitClient(ctx.model, params["max_tokens"])
    expected = registry.build("mechanism", "laplace_dx",
                              {"eta": 40.0, "clip_bound": client.clip_bound}).guarantee(client.space)
    spends = ctx.ledger.spends
    assert [s.guarantee for s in spends] == [expected]
    assert expected == MetricDpGuarantee(40.0, "l2", client.space.name, "token")
    lengths = [int(m.sum()) for text in ctx.dataset["train"].texts
               for _, m in client.batches([text], 1)]
    test_lengths = [int(m.sum()) for text in ctx.dataset["test"].texts
                    for _, m in client.batches([text], 1)]
    assert spends[0].count == sum(lengths) + sum(test_lengths)  # every token, once
    assert ctx.ledger.eta() == pytest.approx(40.0 * sum(s.count for s in spends))
    assert ctx.ledger.eta_per_token() == 40.0
    assert res.metrics["eta_per_doc_max"] >= 40.0 * max(lengths)
    assert UTILITY | {"mi", "clip_bound"} <= set(res.metrics)
    sent = server_view(ctx)["embeddings"]
    assert sent.shape == (params["view_tokens"], 32)
    assert float(sent.norm(dim=1).max()) <= client.clip_bound * (1 + 1e-5)
    assert res.truth["token_ids"].shape == (params["view_tokens"],)
    up = sum(v for k, v in res.wire_bytes.items() if k.endswith("_up_embeddings"))
    assert up > sum(s.count for s in spends) * 32 * 4  # padded batches: more than the real rows
    assert ctx.wire.units["embeddings"] == spends[0].count  # padding verified, not counted


def test_snd_trains_once_then_hits_the_cache(registry, make_ctx, small, cache, tmp_path):
    params, denoiser = small
    snd = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0], [800.0]], "denoiser": denoiser}
    first = _run(registry, make_ctx(cache=cache), "snd", snd)
    second = _run(registry, make_ctx(cache=cache), "snd", snd)
    assert (first.metrics["denoiser_cached"], second.metrics["denoiser_cached"]) == (0.0, 1.0)
    assert first.metrics["denoiser_group"] == 0.0
    for key in UTILITY | {"mi"}:
        assert first.metrics[key] == pytest.approx(second.metrics[key], nan_ok=True)
    files = list((cache / "snd_denoiser").rglob("*.safetensors"))
    assert len(files) == 1 and "in_tok.weight" in load_file(str(files[0]))
    same_group = _run(registry, make_ctx(cache=cache), "snd", {**snd, "eta": 120.0})
    assert same_group.metrics["denoiser_cached"] == 1.0
    fresh = _run(registry, make_ctx(cache=tmp_path / "fresh"), "snd", snd)
    assert fresh.metrics["denoiser_cached"] == 0.0
    assert fresh.metrics["mse"] == first.metrics["mse"]  # seeded init and training: reproducible


def test_snd_denoised_embeddings_are_closer_than_the_noisy_ones(registry, make_ctx, small, cache):
    params, denoiser = small
    snd = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0], [800.0]], "denoiser": denoiser}
    ctx = make_ctx(cache=cache)
    res = _run(registry, ctx, "snd", snd)
    tok = _run(registry, make_ctx(), "tokembpriv", {**params, "eta": 150.0, "clip": True})
    assert res.metrics["mse"] < tok.metrics["mse"]
    assert {s.guarantee.eta for s in ctx.ledger.spends} == {150.0}  # public training: no spend


def test_clean_records_infinite_epsilon_and_is_exact(registry, make_ctx, small):
    params, _ = small
    ctx = make_ctx()
    res = _run(registry, ctx, "snd_clean", params)
    assert isinstance(ctx.ledger.spends[0].guarantee, NoGuarantee)
    assert ctx.ledger.epsilon() == math.inf
    assert res.metrics["mse"] == 0.0 and res.metrics["cosine"] == pytest.approx(1.0)
    inversion = attack_metrics(ctx, res, "nn_inversion", {"ks": [1]})
    assert inversion["inversion_top1"] == 1.0


def test_text2text_and_server_denoise_run_with_their_guarantees(registry, make_ctx, small, cache):
    params, denoiser = small
    ctx = make_ctx()
    t2t = _run(registry, ctx, "snd_text2text", {**params, "eta": 150.0})
    client = SplitClient(ctx.model, params["max_tokens"])
    assert ctx.ledger.spends[0].guarantee == registry.build(
        "mechanism", "text2text", {"eta": 150.0}).guarantee(client.space)
    sent = server_view(ctx)["embeddings"]
    nearest = torch.cdist(sent, client.table, compute_mode="donot_use_mm_for_euclid_dist")
    assert float(nearest.min(1).values.max()) < 1e-6  # the server sees real token embeddings
    assert "mi" not in t2t.metrics and UTILITY <= set(t2t.metrics)
    ctx = make_ctx(cache=cache)
    server = _run(registry, ctx, "snd_server_denoise",
                  {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser})
    assert UTILITY <= set(server.metrics) and server.metrics["denoiser_cached"] == 0.0
    attr = attack_metrics(ctx, server, "attribute_inference", {"epochs": 5})
    assert 0.0 <= attr["attribute_accuracy"] <= 1.0


def test_params_and_inputs_are_validated(registry, make_ctx, small):
    params, _ = small
    with pytest.raises(ParamsError, match="eta_groups"):
        registry.build("defense", "snd", {**params, "eta": 10.0, "eta_groups": [[0.0, 5.0]]})
    with pytest.raises(ParamsError, match="eta"):
        registry.build("defense", "tokembpriv", {**params, "eta": -1.0})
    from dpkit.models import tiny_causal
    with pytest.raises(ValueError, match="causal"):
        _run(registry, make_ctx(model=tiny_causal()), "tokembpriv", {**params, "eta": 10.0})


def test_plan_equals_run_for_every_snd_defense(registry, make_ctx, small, cache):
    from dpkit.accounting import Ledger
    from dpkit.runner.plan import plan_cell

    params, denoiser = small
    cases = {"snd": {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser},
             "tokembpriv": {**params, "eta": 75.0}, "snd_text2text": {**params, "eta": 75.0},
             "snd_clean": params}
    privacy = type("P", (), {"delta": 1e-5, "accountant": "rdp", "ceiling": None})
    for name, raw in cases.items():
        ctx = make_ctx(cache=cache)
        _run(registry, ctx, name, raw)
        plan = plan_cell(registry.build("defense", name, raw), "defense", privacy,
                         make_ctx(cache=cache))
        ran = [(s.label, s.count) for s in ctx.ledger.spends]
        assert ran == [(s["label"], s["count"]) for s in plan["spends"]], name
        assert isinstance(ctx.ledger, Ledger) and ran
    clean = make_ctx(cache=cache)
    _run(registry, clean, "snd_clean", params)
    assert any("clean token embeddings" in r for r in clean.ledger.no_guarantee_reasons)
