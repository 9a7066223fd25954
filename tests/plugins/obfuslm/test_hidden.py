"""ObfusLM+ hidden-dimension obfuscation on BERT and Llama."""

from __future__ import annotations

import copy

import torch

import pytest
from dpkit_obfuslm.common import HIDDEN_REASON
from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden

from dpkit.models import tiny_causal, tiny_encoder
from tests.plugins.obfuslm.conftest import make_ctx

TEXTS = ["the movie was good", "a bad plot and a great actor"]


def test_pure_permutation_keeps_the_causal_lm_exact():
    split = tiny_causal(hidden_size=32)
    ids, mask = split.tokenize(TEXTS)
    model = copy.deepcopy(split.server)
    key = hidden_key(split.embedding_table, k=4, beta=0.5, epsilon=3.0,
                     generator=torch.Generator().manual_seed(0), mix=False)
    assert obfuscate_hidden(model, key) > 10
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        ref = split.server(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    assert torch.allclose(out.logits, ref.logits, atol=1e-4)
    assert torch.allclose(out.hidden_states[1], ref.hidden_states[1][..., key.source], atol=1e-5)
    assert not torch.allclose(out.hidden_states[1], ref.hidden_states[1], atol=1e-3)


def test_pure_permutation_permutes_the_encoder_states():
    split = tiny_encoder(hidden_size=32)
    ids, mask = split.tokenize(TEXTS)
    model = copy.deepcopy(split.server)
    key = hidden_key(split.embedding_table, k=4, beta=0.5, epsilon=3.0,
                     generator=torch.Generator().manual_seed(1), mix=False)
    obfuscate_hidden(model, key)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state
        ref = split.server(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(out, ref[..., key.source], atol=1e-4)


def test_mixing_clusters_dims_and_changes_the_table():
    split = tiny_encoder(hidden_size=32)
    model = copy.deepcopy(split.server)
    key = hidden_key(split.embedding_table, k=4, beta=0.5, epsilon=3.0,
                     generator=torch.Generator().manual_seed(2))
    assert key.clusters is not None and int(key.clusters.sizes.max()) <= 4
    assert torch.allclose(key.transform.sum(0), torch.ones(32), atol=1e-5)  # columns: weights
    obfuscate_hidden(model, key)
    table = model.get_input_embeddings().weight
    assert torch.allclose(table, split.embedding_table @ key.transform, atol=1e-5)


def _norm_gains(model) -> torch.Tensor:
    return torch.cat([m.weight.detach() for name, m in model.named_modules()
                      if "norm" in type(m).__name__.lower() or "layernorm" in name.lower()])


def recover_sigma_from_norm_gains(public, released) -> torch.Tensor:
    """The attack behind HIDDEN_REASON: each released LayerNorm gain vector is the public one
    permuted by σ*, so matching values names the source dimension of every hidden dim."""
    first = next(m for name, m in public.named_modules() if "norm" in type(m).__name__.lower())
    d = first.weight.numel()
    pub, rel = _norm_gains(public).view(-1, d), _norm_gains(released).view(-1, d)
    # match on all norms at once: a dimension's gains across layers form its fingerprint
    dist = torch.cdist(rel.T.double(), pub.T.double())
    return dist.argmin(1)


def test_released_norm_gains_give_sigma_star_away():
    split = tiny_encoder(hidden_size=32)
    public = copy.deepcopy(split.server)
    with torch.no_grad():  # a trained model's gains differ per dimension (tiny init: all ones)
        gen = torch.Generator().manual_seed(3)
        for m in public.modules():
            if "norm" in type(m).__name__.lower():
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=gen))
    released = copy.deepcopy(public)
    key = hidden_key(split.embedding_table, k=4, beta=0.5, epsilon=3.0,
                     generator=torch.Generator().manual_seed(2))
    obfuscate_hidden(released, key)
    assert torch.equal(recover_sigma_from_norm_gains(public, released), key.source)


@pytest.mark.parametrize("plus", [True, False])
def test_plus_second_synthesis_is_on_the_ledger(corpus, plus):
    """ObfusLM+ sends the transformed layers under their own release, ε = ∞ with the reason;
    without ``plus`` nothing of the kind is declared or sent."""
    ctx = make_ctx(tiny_encoder(hidden_size=32), corpus)
    params = {"k": 5, "beta": 0.9, "plus": plus, "k_star": 4, "epochs": 1}
    ctx.registry.build("defense", "obfuslm", params).run(ctx)
    hidden = [s for s in ctx.ledger.spends if s.label.startswith("hidden_layers")]
    if not plus:
        assert not hidden and ctx.wire.bytes(name="hidden_layers") == 0
        return
    (spend,) = hidden
    assert spend.guarantee.notion == "none" and HIDDEN_REASON in spend.guarantee.reason
    assert ctx.wire.units["hidden_layers"] == 1
    server_params = sum(p.numel() for p in ctx.model.server.parameters())
    table = ctx.model.embedding_table.numel()
    assert ctx.wire.bytes(name="hidden_layers") == 4 * (server_params - table)
