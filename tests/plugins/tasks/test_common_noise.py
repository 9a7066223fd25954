"""privatize_text: the Laplace token mechanisms of a spec share one draw per token and seed."""

import dpkit_baselines.laplace as laplace
import dpkit_stencil.mechanisms as stencil
import pytest
import torch

from dpkit.testing.boundary import server_view
from dpkit.testing.params_contract import tiny_context

from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.plugins import get_registry
from dpkit.testing.strategies_tokens import random_space


@pytest.fixture(scope="module")
def setting():
    space = random_space(64, 8, 0, stop_words=True)
    g = torch.Generator().manual_seed(2)
    texts = [" ".join(space.tokens[i] for i in torch.randint(4, 64, (int(n),), generator=g))
             + " unknownword the" for n in torch.randint(1, 12, (30,), generator=g)]
    data = TextDataset("toy", {"test": TextSplit(texts, [i % 2 for i in range(30)])})
    return space, data, get_registry()


def draws(setting, monkeypatch, mechanism, params, seed=0):
    """The result and every standardized noise draw (noise · η) the mechanism made, in order."""
    space, data, registry = setting
    drawn = []

    def record(n, d, eta, generator, device=None):
        noise = laplace_noise(n, d, eta, generator, device)
        drawn.append(noise * eta)
        return noise

    laplace_noise = laplace.sample_laplace_noise
    for module in (laplace, stencil):
        monkeypatch.setattr(module, "sample_laplace_noise", record)
    ctx = tiny_context(space, data, registry=registry, seed=seed)
    result = registry.build("defense", "privatize_text", {
        "mechanism": mechanism, "mechanism_params": params, "oov": "keep"}).run(ctx)
    monkeypatch.undo()
    result.server_view = server_view(ctx)
    return result, torch.cat(drawn)


def test_laplace_noise_and_dx_stencil_draw_the_same_standardized_noise(setting, monkeypatch):
    _, base = draws(setting, monkeypatch, "laplace_dx", {"eta": 3.0})
    _, noise = draws(setting, monkeypatch, "text2text", {"eta": 5.0, "keep_stop_words": True})
    _, window = draws(setting, monkeypatch, "dx_stencil", {"eta": 9.0, "window": 4})
    known = sum(1 for t in setting[1]["test"].texts for w in t.split() if w != "unknownword")
    assert base.shape == noise.shape == window.shape == (known, 8)
    torch.testing.assert_close(noise, base, rtol=1e-5, atol=1e-6)  # η only scales the radius
    torch.testing.assert_close(window, base, rtol=1e-5, atol=1e-6)
    _, other_seed = draws(setting, monkeypatch, "laplace_dx", {"eta": 3.0}, seed=1)
    assert not torch.allclose(other_seed, base)


def test_at_one_eta_noise_is_the_nearest_token_of_laplace_dx_bit_for_bit(setting, monkeypatch):
    vectors, _ = draws(setting, monkeypatch, "laplace_dx", {"eta": 4.0})
    tokens, _ = draws(setting, monkeypatch, "text2text", {"eta": 4.0})
    sent = vectors.server_view["substituted_ids"]  # laplace_dx's noisy vectors decoded (L2)
    assert torch.equal(tokens.server_view["substituted_ids"], sent)
    assert 0.1 < float((sent != vectors.truth["token_ids"]).float().mean()) < 0.9
