"""Common random numbers across the SnD family, and the noiseless ceiling (η = ∞)."""

from __future__ import annotations

import math

import dpkit_snd.defenses as defenses
import pytest
import torch
from dpkit_baselines.laplace import Text2Text
from dpkit_snd.client import SplitClient

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.text.search import VocabIndex


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One artifact cache for the module (each denoiser trains once)."""
    return tmp_path_factory.mktemp("snd-crn-cache")


def uploads(monkeypatch, registry, ctx, name: str, params: dict) -> list[torch.Tensor]:
    """Every privatized batch X̃ the defense ``name`` sends (train and test), in order."""
    sent: list[torch.Tensor] = []
    original = defenses.privatize_tokens

    def record(*args, **kwargs):
        out = original(*args, **kwargs)
        sent.append(out.x_priv.clone())
        return out

    monkeypatch.setattr(defenses, "privatize_tokens", record)
    registry.build("defense", name, params).run(ctx)
    monkeypatch.setattr(defenses, "privatize_tokens", original)
    return sent


def test_snd_tokembpriv_and_server_denoise_send_bit_identical_uploads(
        registry, make_ctx, small, cache, monkeypatch):
    params, denoiser = small
    eta, groups = 150.0, [[100.0, 200.0]]
    runs = {}
    for name, raw in {"snd": {"eta_groups": groups, "denoiser": denoiser},
                      "tokembpriv": {"clip": True},
                      "snd_server_denoise": {"eta_groups": groups, "denoiser": denoiser}}.items():
        ctx = make_ctx(cache=cache, seed=3)
        runs[name] = (uploads(monkeypatch, registry, ctx, name, {**params, "eta": eta, **raw}),
                      [(s.guarantee, s.count) for s in ctx.ledger.spends])
    (snd, snd_spends), (tok, tok_spends), (server, server_spends) = runs.values()
    assert len(snd) == len(tok) == len(server) > 2  # train and test batches
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(snd, tok, server))
    # the ledger does not depend on the stream: the same spends, η per token on every token
    assert snd_spends == tok_spends == server_spends
    guarantee = snd_spends[0][0]
    assert isinstance(guarantee, MetricDpGuarantee) and guarantee.eta == eta
    other = uploads(monkeypatch, registry, make_ctx(cache=cache, seed=4), "tokembpriv",
                    {**params, "eta": eta, "clip": True})
    assert not torch.equal(other[0], tok[0])  # another seed, another draw


def test_text2text_decodes_the_same_noise_draw(registry, make_ctx, small, monkeypatch):
    params, _ = small
    noisy = uploads(monkeypatch, registry, make_ctx(seed=5), "tokembpriv",
                    {**params, "eta": 60.0, "clip": False})
    substituted: list[torch.Tensor] = []
    original = Text2Text.privatize

    def record(self, x, **kwargs):
        out = original(self, x, **kwargs)
        substituted.append(out.clone())
        return out

    monkeypatch.setattr(Text2Text, "privatize", record)
    ctx = make_ctx(seed=5)
    registry.build("defense", "snd_text2text", {**params, "eta": 60.0}).run(ctx)
    client = SplitClient(ctx.model, params["max_tokens"])
    index = VocabIndex(client.space.vectors, "l2")
    batches = [b for split in ("train", "test") for b in _batches(ctx, client, params, split)]
    assert len(substituted) == len(noisy) == len(batches)
    changed = 0
    for ids, x_priv, (clean_ids, mask) in zip(substituted, noisy, batches):
        nearest = index.search(x_priv[mask.bool()], 1)[1][:, 0]
        assert torch.equal(ids, nearest)  # Text2Text = nearest token of TokEmbPriv's upload
        changed += int((ids != clean_ids[mask.bool()]).sum())
    assert changed > 0  # η = 60 on the tiny table changes tokens: the comparison is not vacuous


def _batches(ctx, client, params, split):
    from dpkit_snd.pipeline import load_split
    return load_split(ctx, client, split, params[f"{split}_examples"], params["batch_size"]).batches


def test_noiseless_snd_reaches_the_clean_reference(registry, make_ctx, small, cache):
    """η = ∞: nothing drawn, ε = ∞ on the ledger, and the denoiser (trained on noise) leaves the
    clean embedding where it is, so SnD's utility is the no-noise reference's."""
    params, denoiser = small
    snd = {**params, "eta_groups": [[100.0, 200.0]], "denoiser": {**denoiser, "epochs": 4}}
    ctx = make_ctx(cache=cache)
    ceiling = registry.build("defense", "snd", {**snd, "eta": math.inf}).run(ctx)
    spend = ctx.ledger.spends[0]
    assert isinstance(spend.guarantee, NoGuarantee) and "η = ∞" in spend.guarantee.reason
    assert ctx.ledger.epsilon() == math.inf
    clean = registry.build("defense", "snd_clean", params).run(make_ctx())
    noisy = registry.build("defense", "snd", {**snd, "eta": 150.0}).run(make_ctx(cache=cache))
    assert ceiling.metrics["denoiser_group"] == noisy.metrics["denoiser_group"]  # same denoiser
    assert ceiling.metrics["cosine"] > 0.99 > 0.95 > noisy.metrics["cosine"]
    assert ceiling.metrics["mse"] < 0.25 * noisy.metrics["mse"]  # measured: 0.14
    assert ceiling.metrics["accuracy"] == pytest.approx(clean.metrics["accuracy"], abs=0.1)
    assert ceiling.metrics["auc"] == pytest.approx(clean.metrics["auc"], abs=0.1)
