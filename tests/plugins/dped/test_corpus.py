"""Shards, public vocabulary and skip-gram pairs."""

from __future__ import annotations

import numpy as np
import torch
from dpkit_dped.corpus import (
    build_vocabulary,
    document_tensor,
    draw_pairs,
    encode,
    partition,
    skipgram_pairs,
    tokenize,
)
from dpkit_dped.defenses import DpedDefense


from .conftest import TEACHER, make_texts, teachers_changed_by_one_document


def test_removing_one_document_changes_only_its_shard():
    texts, _ = make_texts(200, seed=3)
    before = partition(texts, 5, seed=7)
    assert sorted(i for s in before for i in s) == list(range(200))
    removed = 57
    after = partition(texts[:removed] + texts[removed + 1:], 5, seed=7)
    as_text = lambda shards, src: [sorted(src[i] for i in s) for s in shards]
    b = as_text(before, texts)
    a = as_text(after, texts[:removed] + texts[removed + 1:])
    changed = [k for k in range(5) if a[k] != b[k]]
    assert len(changed) == 1 and texts[removed] in b[changed[0]]


def test_vocabulary_comes_from_public_text_only():
    vocab = build_vocabulary(["alpha beta beta gamma", "beta gamma"], size=10, min_count=1)
    assert vocab.words == ("beta", "gamma", "alpha")
    assert "secret" not in vocab.index
    assert encode(["secret beta alpha"], vocab)[0].tolist() == [0, 2]


def test_skipgram_pairs_stay_within_window():
    doc = np.arange(10)
    c, x = skipgram_pairs([doc], window=2, max_pairs=10**6, rng=np.random.default_rng(0))
    assert len(c) == 2 * (9 + 8)
    assert int((c - x).abs().max()) == 2 and int((c - x).abs().min()) == 1
    assert tokenize("Hello, World's 2nd") == ["hello", "world", "s", "nd"]


def test_one_changed_document_changes_at_most_one_teacher(make_ctx):
    same, _ = teachers_changed_by_one_document(make_ctx, DpedDefense.Params.model_validate(TEACHER))
    assert same.count(False) == 1, same


def test_dpsgd_pairs_stay_inside_their_document_and_window():
    docs = [np.arange(10, 17), np.array([3]), np.arange(40, 100)]
    tokens, lengths = document_tensor(docs, max_len=50)
    assert lengths.tolist() == [7, 1, 50] and tokens[2, -1] == 89  # cut at 50 ids
    gen = torch.Generator().manual_seed(0)
    c, x, m = draw_pairs(tokens, lengths, pairs=400, window=3, generator=gen)
    ok = m.bool()
    assert not ok[1].any()  # a one-word document gives no pair
    gap = (c - x).abs()[ok]
    assert int(gap.min()) >= 1 and int(gap.max()) <= 3  # ids are consecutive within a document
    assert bool(((c[0][ok[0]] >= 10) & (x[0][ok[0]] < 17)).all())
    assert ok[0].float().mean() > 0.5
