"""SnD's client: the clip bound C is the table's largest row norm, the client embeds the ids it
is given (nothing else, outside autograd), and its batches carry every text once, truncated."""

from __future__ import annotations

import pytest
import torch
from dpkit_snd.client import SplitClient

from dpkit.models import tiny_causal, tiny_encoder

TEXTS = ["the movie was good", "bad plot", "a great actor and a story", "i hate it",
         "the film was fresh and fun", "boring"]


@pytest.fixture(scope="module")
def client():
    return SplitClient(tiny_encoder(16, 1, 2, 0), max_tokens=5)


def test_the_clip_bound_is_the_largest_token_embedding_norm(client):
    norms = client.table.norm(dim=-1)
    assert client.clip_bound == pytest.approx(float(norms.max()))
    assert bool((norms <= client.clip_bound).all()) and int((norms == norms.max()).sum()) >= 1


def test_the_client_embeds_exactly_the_ids_it_is_given_outside_autograd(client):
    ids = torch.tensor([[2, 7, 7, 0], [5, 1, 3, 3]])
    x = client.embed(ids)
    assert torch.equal(x, client.table[ids])
    assert not x.requires_grad and x.grad_fn is None


def test_batches_carry_every_text_once_truncated_to_max_tokens(client):
    batches = client.batches(TEXTS, batch_size=4)
    assert [len(ids) for ids, _ in batches] == [4, 2]
    for (ids, mask), start in zip(batches, (0, 4)):
        expected = client.model.tokenize(TEXTS[start:start + 4], 5)
        assert torch.equal(ids, expected.input_ids) and torch.equal(mask, expected.attention_mask)
        assert ids.shape[1] <= 5
    assert client.batches([], 4) == []


def test_a_causal_model_is_refused_naming_an_encoder():
    with pytest.raises(ValueError, match="encoder"):
        SplitClient(tiny_causal(16, 1, 2, 0), max_tokens=5)
