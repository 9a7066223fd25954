"""The SnD family's client side, run by run: the mechanism at the defense's η and clip (the
noiseless one at η = ∞), noise from the run's secret stream, what crosses is the privatized
batch and nothing else, and the declared count is every token of the texts the run reads."""

from __future__ import annotations

import math

import dpkit_snd.defenses as defenses
import pytest
import torch
from dpkit_baselines.laplace import Text2Text
from dpkit_snd.client import SplitClient
from dpkit_snd.pipeline import load_split
from dpkit_snd.server import PAD_ID

import dpkit
from dpkit.accounting import NoGuarantee

SECRET = "the client's secret"
READ = {"train_examples": 24, "test_examples": 12, "batch_size": 8,  # fewer texts than it holds
        "classifier_epochs": 1, "mi_tokens": 32, "view_tokens": 32}


def spy_sends(ctx, name: str) -> list[torch.Tensor]:
    """Every tensor sent under ``name`` on ``ctx.wire`` from now on."""
    sent, send = [], ctx.wire.send

    def spy(what, tensor=None, *args, **kwargs):
        if what == name:
            sent.append(tensor.clone())
        return send(what, tensor, *args, **kwargs)

    ctx.wire.send = spy
    return sent


def run_cell(registry, make_ctx, small, name: str, upload: str, **raw):
    """(result, ctx, client, what crossed under ``upload``, the (ids, mask) batches of the train
    then test texts the run read) of one run of ``name`` under SECRET."""
    from tests.plugins.snd.conftest import generated_dataset

    params = {**small[0], **READ, **raw}
    data = generated_dataset(40, 20)
    ctx = make_ctx(dataset=data)
    ctx.noise_secret = SECRET
    client = SplitClient(ctx.model, params["max_tokens"])
    sent = spy_sends(ctx, upload)
    result = registry.build("defense", name, params).run(ctx)
    read = make_ctx(dataset=data)
    train, test = (load_split(read, client, split, READ[f"{split}_examples"], params["batch_size"])
                   for split in ("train", "test"))
    batches = train.batches + test.batches
    assert len(sent) == len(batches) > 2
    # the attacks' ground truth: the first test tokens the server kept, the texts' labels
    shown = torch.cat([ids[mask.bool()] for ids, mask in test.batches])[:READ["view_tokens"]]
    assert torch.equal(result.truth["token_ids"], shown)
    assert torch.equal(result.truth["attributes"], test.labels)
    return result, ctx, client, sent, batches


def secret_stream(make_ctx) -> torch.Tensor:
    """The starting state of the uploads' stream under SECRET."""
    fresh = make_ctx()
    fresh.noise_secret = SECRET
    state = fresh.noise_generator(defenses.UPLOAD_NOISE).get_state()
    assert not torch.equal(state, fresh.generator(defenses.UPLOAD_NOISE).get_state())
    return state


@pytest.mark.parametrize("eta, clip", [(60.0, True), (60.0, False), (math.inf, True)])
def test_tokembpriv_sends_each_batch_privatized_from_the_secret_stream(
        registry, make_ctx, small, monkeypatch, eta, clip):
    calls, privatize = [], defenses.privatize_tokens

    def spy(mech, x, mask, *, space, generator):
        calls.append((mech, x.clone(), mask, generator, generator.get_state()))
        out = privatize(mech, x, mask, space=space, generator=generator)
        calls[-1] += (out.x_priv,)
        return out

    monkeypatch.setattr(defenses, "privatize_tokens", spy)
    res, ctx, client, sent, batches = run_cell(registry, make_ctx, small, "tokembpriv",
                                               "embeddings", eta=eta, clip=clip)
    assert len(calls) == len(batches)
    for (mech, x, mask, gen, _, x_priv), tensor, (ids, batch_mask) in zip(calls, sent, batches):
        assert torch.equal(mask, batch_mask) and torch.equal(x, client.embed(ids))
        assert torch.equal(tensor, x_priv.masked_fill(~mask.bool().unsqueeze(-1), 0))
        assert mech is calls[0][0] and gen is calls[0][3]  # one mechanism, one stream
    mech = calls[0][0]
    bound = client.clip_bound if clip else None
    if math.isinf(eta):
        assert isinstance(mech, dpkit.Noiseless) and mech.bound == bound
        assert mech.reason == "tokembpriv at η = ∞ sends the token embeddings without noise"
        assert isinstance(ctx.ledger.spends[0].guarantee, NoGuarantee)
    else:
        expected = registry.build("mechanism", "laplace_dx",
                                  {"eta": eta} | ({"clip_bound": bound} if clip else {}))
        assert mech.params == expected.params
        assert ctx.ledger.spends[0].guarantee == expected.guarantee(client.space)
        assert torch.equal(calls[0][4], secret_stream(make_ctx))
    (spend,) = ctx.ledger.spends
    n_tokens = sum(int(m.sum()) for _, m in batches)
    assert spend.count == ctx.wire.units["embeddings"] == n_tokens
    assert n_tokens < sum(len(client.batches([t], 1)[0][1].nonzero()) for t in
                          [*ctx.dataset["train"].texts, *ctx.dataset["test"].texts])  # limits bite
    assert res.metrics["clip_bound"] == (client.clip_bound if clip else math.inf)
    lengths = torch.cat([m.sum(1) for _, m in batches]).float()  # tokens per text read
    assert res.metrics["tokens_per_doc"] == pytest.approx(float(lengths.mean()))
    # the per-text bound: η per token over the longest text, each token moved at most 2C
    longest = float(lengths.max())
    assert res.metrics["eta_per_doc_max"] == eta * longest
    assert res.metrics["epsilon_doc_bound"] == eta * longest * 2 * client.clip_bound
    assert res.wire_bytes == ctx.wire.summary()


def test_text2text_sends_the_substituted_ids_drawn_from_the_secret_stream(
        registry, make_ctx, small, monkeypatch):
    calls, privatize = [], Text2Text.privatize

    def spy(self, ids, *, space, generator):
        calls.append((self, ids.clone(), generator.get_state()))
        out = privatize(self, ids, space=space, generator=generator)
        calls[-1] += (out.clone(),)
        return out

    monkeypatch.setattr(Text2Text, "privatize", spy)
    res, ctx, client, sent, batches = run_cell(registry, make_ctx, small, "snd_text2text",
                                               "substituted_ids", eta=60.0)
    assert len(calls) == len(batches)
    for (mech, ids_in, _, out), tensor, (ids, mask) in zip(calls, sent, batches):
        keep = mask.bool()
        assert torch.equal(ids_in, ids[keep]) and mech.params.eta == 60.0
        expected = torch.full_like(ids, PAD_ID)
        expected[keep] = out
        assert torch.equal(tensor, expected)
    assert torch.equal(calls[0][2], secret_stream(make_ctx))
    (spend,) = ctx.ledger.spends
    # every token counts: an id is an element of the [B, n] batch, not a row (a text) of it
    assert spend.count == ctx.wire.units["substituted_ids"] == sum(int(m.sum()) for _, m in batches)
    assert spend.guarantee == registry.build("mechanism", "text2text", {"eta": 60.0}).guarantee(
        client.space)
    assert res.wire_bytes == ctx.wire.summary() and "mi" not in res.metrics


def test_clean_sends_the_clean_batches_and_declares_them_without_a_guarantee(
        registry, make_ctx, small):
    res, ctx, client, sent, batches = run_cell(registry, make_ctx, small, "snd_clean", "embeddings")
    for tensor, (ids, mask) in zip(sent, batches):
        assert torch.equal(tensor, client.embed(ids).masked_fill(~mask.bool().unsqueeze(-1), 0))
    (spend,) = ctx.ledger.spends
    assert spend.guarantee == NoGuarantee(defenses.SnDClean.REASON)
    assert res.metrics["eta_per_doc_max"] == res.metrics["epsilon_doc_bound"] == math.inf
    assert spend.count == ctx.wire.units["embeddings"] == sum(int(m.sum()) for _, m in batches)
    assert res.wire_bytes == ctx.wire.summary() and "mi" not in res.metrics


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One artifact cache for the module (each denoiser trains once)."""
    return tmp_path_factory.mktemp("snd-run-cache")


@pytest.mark.parametrize("name", ["snd", "snd_server_denoise"])
def test_a_denoising_run_sends_the_same_uploads_and_reports_its_denoiser(
        registry, make_ctx, small, cache, name):
    """SnD denoises on the client, the ablation on the server: the same privatized uploads cross,
    and the run reports the denoiser it used (its group, its cache hit, its training curve)."""
    _, denoiser = small
    raw = {"eta": 60.0, "eta_groups": [[50.0, 100.0]], "denoiser": denoiser}
    factory = lambda **kw: make_ctx(cache=cache, **kw)  # noqa: E731
    res, ctx, _, sent, _ = run_cell(registry, factory, small, name, "embeddings", **raw)
    tok, *_, tok_sent, _ = run_cell(registry, factory, small, "tokembpriv", "embeddings",
                                    eta=60.0, clip=True)
    assert all(torch.equal(a, b) for a, b in zip(sent, tok_sent))  # one stream, one clip
    assert res.metrics["denoiser_group"] == 0.0 and "denoiser_cached" in res.metrics
    curves = [c["component"] for c in res.training_curves]
    assert len(curves) == 2 and curves[0] == tok.training_curves[0]["component"]
