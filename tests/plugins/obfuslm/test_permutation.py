"""Permuted vocabulary: encode/decode round trip; the client decodes exactly what the server made."""

from __future__ import annotations

import copy

import torch

from dpkit.models import tiny_causal
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.obfuscate import VocabKey, install_tables, obfuscate_tables

PROMPTS = ["the movie was good and the plot", "a bad actor in a boring film"]


def greedy(model, ids, new_tokens, eos, pad):
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=eos, pad_token_id=pad)
    return out[:, ids.shape[1]:]


def test_key_round_trip():
    key = VocabKey.random(1000, torch.Generator().manual_seed(0))
    ids = torch.randint(0, 1000, (7, 9))
    assert torch.equal(key.decode(key.encode(ids)), ids)
    assert not torch.equal(key.encode(ids), ids)
    table = torch.randn(1000, 4)
    assert torch.equal(key.permute_rows(table)[key.encode(ids)], table[ids])


def test_permutation_alone_changes_nothing_the_client_sees():
    split = tiny_causal(hidden_size=32, seed=1)
    tok = split.tokenizer
    plain_ids = torch.tensor([split.tokenizer(PROMPTS[0])["input_ids"]])
    expected = greedy(split.server, plain_ids, 8, tok.eos_token_id, tok.pad_token_id)
    # k = 1: every cluster is a single row, so the tables are only permuted.
    tables = obfuscate_tables(split.embedding_table, None, k=1, beta=0.5, epsilon=1.0,
                              generator=torch.Generator().manual_seed(2))
    server = copy.deepcopy(split.server)
    install_tables(server, tables)
    client = ObfusClient(split, tables.key)
    sent = client.tokenize(PROMPTS[:1]).ids
    assert not torch.equal(sent, plain_ids)
    made = greedy(server, sent, 8, client.special_obfuscated_id(tok.eos_token_id),
                  client.special_obfuscated_id(tok.pad_token_id))
    assert torch.equal(tables.key.decode(made), expected)
    assert client.decode(made) == split.decode(expected)


def test_client_decodes_exactly_what_the_obfuscated_server_generated():
    split = tiny_causal(hidden_size=32, seed=2)
    tok = split.tokenizer
    tables = obfuscate_tables(split.embedding_table, None, k=5, beta=0.5, epsilon=1.0,
                              generator=torch.Generator().manual_seed(3))
    server = copy.deepcopy(split.server)
    install_tables(server, tables)
    client = ObfusClient(split, tables.key)
    sent = client.tokenize(PROMPTS[1:]).ids
    made = greedy(server, sent, 8, client.special_obfuscated_id(tok.eos_token_id),
                  client.special_obfuscated_id(tok.pad_token_id))
    # The same synthesized rows, back in the original order, in an unpermuted model.
    reference = copy.deepcopy(split.server)
    with torch.no_grad():
        reference.get_input_embeddings().weight.copy_(tables.embeddings[tables.key.forward])
    plain = greedy(reference, tables.key.decode(sent), 8, tok.eos_token_id, tok.pad_token_id)
    assert torch.equal(tables.key.decode(made), plain)
    assert client.decode(made) == split.decode(plain)
    assert not torch.equal(made, plain)   # the server saw only obfuscated ids
