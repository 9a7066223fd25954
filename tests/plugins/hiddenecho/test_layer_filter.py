"""Integrated-gradient layer filter (Eq. 10–11) on a constructed model and a tiny BERT."""

from types import SimpleNamespace

import pytest
import torch
from dpkit_hiddenecho.layer_filter import (
    evenly_spaced_layers,
    ig_baseline,
    layer_contribution,
    layer_contributions,
    readout_direction,
    select_layers,
)
from dpkit_hiddenecho.body import ReplaceOutput, transformer_blocks
from torch import nn

from dpkit.models import tiny_encoder


class SkipBody(nn.Module):
    """Four linear blocks; block 1 shrinks its input 100×, and block 0's output skips to the end."""

    def __init__(self, dim):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(4))
        with torch.no_grad():
            for layer, scale in zip(self.layers, (1.0, 0.01, 1.0, 1.0)):
                layer.weight.copy_(scale * torch.eye(dim))

    def forward(self, x):
        states = [x]
        for layer in self.layers:
            states.append(layer(states[-1]))
        return states, states[-1] + 2.0 * states[1]


class SkipSplit:
    """The constructed body behind the SplitModel calls the layer filter uses."""

    num_layers = 4

    def __init__(self, dim=6):
        self.server = SkipBody(dim)

    def server_forward(self, inputs_embeds, attention_mask, output_hidden_states=True):
        states, last = self.server(inputs_embeds)
        return SimpleNamespace(hidden_states=tuple(states), last_hidden=last)


def test_filter_picks_the_layer_that_matters():
    model = SkipSplit()
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(4, 5, 6, generator=g)
    mask = torch.ones(4, 5, dtype=torch.bool)
    scores = layer_contributions(model, emb, mask, steps=4)
    assert scores.shape == (3,)
    assert int(scores.argmax()) == 0
    assert scores[0] > 50 * scores[1:].max()
    assert select_layers(scores, 1, 4) == [0, 3]


@pytest.mark.parametrize("baseline", ["mean", "zero"])
def test_contribution_is_output_change_on_a_linear_body(baseline):
    model = SkipSplit()
    emb = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 3, dtype=torch.bool)
    out = model.server_forward(emb, mask)
    u = readout_direction(out.last_hidden)
    blocks = transformer_blocks(model.server, 4)
    for layer in range(3):
        state = out.hidden_states[layer + 1]
        ig = layer_contribution(model, blocks, layer, emb, mask, state, u, 3, baseline)
        handle = blocks[layer].register_forward_hook(ReplaceOutput(ig_baseline(state, mask, baseline)))
        moved = model.server_forward(emb, mask).last_hidden
        handle.remove()
        assert torch.allclose(ig, ((out.last_hidden - moved) * u).sum((1, 2)), rtol=1e-4, atol=1e-5)


def test_mean_baseline_satisfies_completeness_on_tiny_bert():
    model = tiny_encoder(32, 3, 2, 0)
    ids, mask = model.tokenize(["the movie was good", "a bad plot and a bad actor"])
    emb = model.embed(ids).detach()
    out = model.server_forward(emb, mask)
    u = readout_direction(out.last_hidden)
    blocks = transformer_blocks(model.server, model.num_layers)
    state = out.hidden_states[1]
    ig = layer_contribution(model, blocks, 0, emb, mask, state, u, 32)
    handle = blocks[0].register_forward_hook(ReplaceOutput(ig_baseline(state, mask, "mean")))
    moved = model.server_forward(emb, mask).last_hidden
    handle.remove()
    exact = ((out.last_hidden - moved) * u * mask.unsqueeze(-1)).sum((1, 2))
    assert torch.allclose(ig, exact, rtol=0.05)


def test_zero_baseline_is_degenerate_after_post_layernorm():
    """Eq. 10 as printed: BERT blocks end in LayerNorm, so scaling H_i changes nothing (IG ≈ 0)."""
    model = tiny_encoder(32, 3, 2, 0)
    ids, mask = model.tokenize(["the movie was good"])
    emb = model.embed(ids).detach()
    zero = layer_contributions(model, emb, mask, steps=4, baseline="zero")
    mean = layer_contributions(model, emb, mask, steps=4, baseline="mean")
    assert zero.abs().max() < 1e-4 < mean.min()


def test_fixed_layers_and_bad_steps():
    assert evenly_spaced_layers(2, 6) == [2, 5]
    assert evenly_spaced_layers(3, 6)[-1] == 5
    assert select_layers(torch.tensor([0.1, 0.9, 0.5]), 2, 4, keep_last=False) == [1, 2]
    with pytest.raises(ValueError, match="steps"):
        layer_contributions(SkipSplit(), torch.zeros(1, 2, 6), torch.ones(1, 2), steps=0)
