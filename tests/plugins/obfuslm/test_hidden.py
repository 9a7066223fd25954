"""ObfusLM+ hidden-dimension obfuscation on BERT and Llama."""

from __future__ import annotations

import copy

import torch

from dpkit.models import tiny_causal, tiny_encoder
from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden

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
