"""The denoise transformers: shapes, padding, limits, and that training reduces the error."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit_snd.client import SplitClient
from dpkit_snd.denoiser import DenoiserConfig, ServerTokenDenoiser, SnDDenoiser
from dpkit_snd.privatize import privatize_tokens
from dpkit_snd.training import TrainPlan, default_config, train_server, train_snd

CFG = DenoiserConfig(emb_dim=24, tok_dim=16, d_model=32, d_ff=48, n_head=4, n_layers=2,
                     max_tokens=10)


def test_snd_denoiser_shapes_and_padding_invariance():
    torch.manual_seed(0)
    model = SnDDenoiser(CFG).eval()
    torch.nn.init.normal_(model.head.weight, std=0.1)
    e, x, z = torch.randn(3, 24), torch.randn(3, 6, 16), torch.randn(3, 6, 16)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4])
    out = model(e, x, z, mask)
    assert out.shape == (3, 24)
    alone = model(e[1:2, :], x[1:2, :4], z[1:2, :4], mask[1:2, :4])
    torch.testing.assert_close(out[1:2], alone, atol=1e-5, rtol=1e-5)
    moved = model(e, x, z + 1.0, mask)
    assert not torch.allclose(moved, out), "the denoiser must condition on the noise Z"


def test_server_denoiser_shapes_and_length_limit():
    model = ServerTokenDenoiser(CFG).eval()
    x, mask = torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.long)
    assert model(x, mask).shape == (2, 5, 16)
    with pytest.raises(ValueError, match="max_tokens=10"):
        model(torch.randn(1, 11, 16), torch.ones(1, 11))
    with pytest.raises(ValueError, match="divisible"):
        DenoiserConfig(8, 8, d_model=30, d_ff=8, n_head=4, n_layers=1, max_tokens=4)


def test_default_config_is_scaled_to_the_encoder(tiny_model):
    cfg = default_config(SplitClient(tiny_model, 12), None, None, None, 3)
    assert (cfg.d_model, cfg.d_ff, cfg.emb_dim, cfg.tok_dim, cfg.max_tokens) == (32, 32, 32, 32, 12)
    assert cfg.n_head == 1 and cfg.n_layers == 3


def _held_out_mse(model, client, mech, texts, gen):
    """(noisy MSE, denoised MSE) against the clean embedding on fresh noise."""
    ids, mask = client.batches(texts, len(texts))[0]
    x = client.embed(ids)
    p = privatize_tokens(mech, x, mask, space=client.space, generator=gen)
    e_clean, e_noisy = client.server(x, mask), client.server(p.x_priv, mask)
    with torch.no_grad():
        e_d = model(e_noisy, p.x_priv, p.noise, mask)
    return float(((e_noisy - e_clean) ** 2).mean()), float(((e_d - e_clean) ** 2).mean())


def test_training_reduces_mse_on_training_distribution_noise(tiny_model, registry, texts):
    client = SplitClient(tiny_model, 16)
    mech = registry.build("mechanism", "laplace_dx", {"eta": 150.0, "clip_bound": client.clip_bound})
    texts, _ = texts(192, seed=3)
    torch.manual_seed(0)
    model = SnDDenoiser(default_config(client, 32, 64, 2, 1))
    gen = torch.Generator().manual_seed(0)
    before = _held_out_mse(model, client, mech, texts[128:], torch.Generator().manual_seed(1))
    curve = train_snd(model, client, texts[:128], [mech],
                      TrainPlan(epochs=4, batch_size=32, lr=3e-3), gen, lambda msg: None,
                      validation=texts[128:], val_seed=1)
    noisy, denoised = _held_out_mse(model, client, mech, texts[128:],
                                    torch.Generator().manual_seed(1))
    assert before[0] == pytest.approx(before[1])  # zero-initialised head: starts as identity
    assert denoised < 0.8 * noisy, (noisy, denoised)  # measured ≈ 0.65
    assert curve.steps == [1, 2, 3, 4] and len(curve.val_loss) == 4
    assert curve.val_loss[-1] < curve.val_loss[0] and curve.train_loss[-1] < curve.train_loss[0]
    assert curve.final_val == pytest.approx(denoised, rel=0.3)  # same held-out texts, other noise


def test_server_denoiser_training_reduces_token_error(tiny_model, registry, texts):
    client = SplitClient(tiny_model, 16)
    mech = registry.build("mechanism", "laplace_dx", {"eta": 150.0, "clip_bound": client.clip_bound})
    texts, _ = texts(192, seed=4)
    torch.manual_seed(0)
    model = ServerTokenDenoiser(default_config(client, 32, 64, 2, 1))
    curve = train_server(model, client, texts[:160], [mech],
                         TrainPlan(epochs=4, batch_size=32, lr=3e-3),
                         torch.Generator().manual_seed(0), lambda msg: None)
    assert len(curve.train_loss) == 4 and all(math.isnan(v) for v in curve.val_loss)
    ids, mask = client.batches(texts[160:], 32)[0]
    x = client.embed(ids)
    p = privatize_tokens(mech, x, mask, space=client.space, generator=torch.Generator().manual_seed(2))
    keep = mask.bool()
    with torch.no_grad():
        est = model(p.x_priv, mask)
    assert ((est - x)[keep] ** 2).mean() < 0.9 * ((p.x_priv - x)[keep] ** 2).mean()
