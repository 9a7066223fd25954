"""ObfusLM's client: what it sends is the tokenizer's ids mapped through the secret key (never the
plain ids), cut to the longest text and at most ``max_length``, with the mask and integer labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.obfuscate import VocabKey

from dpkit.models import tiny_causal, tiny_encoder

tiny_encoder(hidden_size=16)  # built at collection (then cached), not in each forked test run
TEXTS = ["the movie was good", "bad", "a great actor and a fresh story it was"]


@pytest.fixture(scope="module")
def model():
    return tiny_encoder(hidden_size=16)


@pytest.fixture(scope="module")
def key(model):
    return VocabKey.random(model.vocab_size, torch.Generator().manual_seed(0))


def plain(model, texts, max_length):
    """Each text's ids as the tokenizer gives them unpadded, truncated to ``max_length``."""
    return [torch.tensor(model.tokenizer(t, truncation=True, max_length=max_length)["input_ids"])
            for t in texts]


def test_the_sent_ids_are_the_plain_ids_through_the_key_cut_to_the_longest_text(model, key):
    client = ObfusClient(model, key, max_length=32)
    sent = client.tokenize(TEXTS, [1, 0, 1])
    docs = plain(model, TEXTS, 32)
    width = max(len(d) for d in docs)
    assert sent.ids.shape == sent.mask.shape == (3, width) < (3, 32)
    assert [int(n) for n in sent.mask.sum(1)] == [len(d) for d in docs]
    for row, doc in zip(sent.documents(), docs):
        assert torch.equal(row, key.encode(doc)) and not torch.equal(row, doc)
    assert torch.equal(key.decode(sent.ids[sent.mask.bool()]), torch.cat(docs))
    assert sent.labels.dtype == torch.long and sent.labels.tolist() == [1, 0, 1]
    assert client.tokenize(TEXTS).labels is None


def test_texts_longer_than_max_length_are_truncated_to_it(model, key):
    sent = ObfusClient(model, key, max_length=5).tokenize(TEXTS)
    docs = plain(model, TEXTS, 5)
    assert sent.ids.shape == (3, 5) and max(len(d) for d in docs) == 5
    assert [row.tolist() for row in sent.documents()] == [key.encode(d).tolist() for d in docs]


def test_the_identity_key_sends_the_plain_ids_and_decoding_inverts_the_key(model, key):
    ids = ObfusClient(model, VocabKey.identity(model.vocab_size), 32).tokenize(TEXTS).documents()
    assert [d.tolist() for d in ids] == [d.tolist() for d in plain(model, TEXTS, 32)]
    client = ObfusClient(model, key, 32)
    obfuscated = client.tokenize(["the movie"]).ids
    assert client.decode(obfuscated) == model.decode(key.decode(obfuscated))
    cls = model.tokenizer.cls_token_id
    assert client.special_obfuscated_id(cls) == int(key.forward[cls]) == int(obfuscated[0, 0])


def test_labels_cross_as_int64_whatever_integer_type_the_dataset_holds(model, key):
    labels = np.array([1, 0, 1], dtype=np.int32)  # e.g. a numpy or Arrow column
    sent = ObfusClient(model, key, 32).tokenize(TEXTS, list(labels))
    assert sent.labels.dtype == torch.long and sent.labels.tolist() == [1, 0, 1]


def test_no_column_of_padding_only_is_sent():
    causal = tiny_causal(hidden_size=16)  # a BOS token only: an empty text is one id
    client = ObfusClient(causal, VocabKey.identity(causal.vocab_size), 8)
    sent = client.tokenize(["", ""])
    assert sent.ids.shape == (2, 1) and bool(sent.mask.all())
