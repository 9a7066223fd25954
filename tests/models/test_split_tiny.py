"""Split wrapper on the tiny models: split path equals unsplit path, shapes, pooling, space."""

import pytest
import torch

from dpkit.models import SplitModel, last_token_pool, mean_pool, tiny_causal, tiny_encoder

TEXTS = ["A man is eating food.", "the movie was good, but the plot was bad and far too long"]


@pytest.fixture(scope="module", params=["encoder", "causal"])
def model(request) -> SplitModel:
    return tiny_encoder() if request.param == "encoder" else tiny_causal()


def test_split_forward_equals_unsplit(model):
    ids, mask = model.tokenize(TEXTS)
    split = model.server_forward(model.embed(ids), mask)
    whole = model.forward_ids(ids, mask)
    torch.testing.assert_close(split.pooled, whole.pooled, rtol=0, atol=0)
    torch.testing.assert_close(split.last_hidden, whole.last_hidden, rtol=0, atol=0)
    assert len(split.hidden_states) == model.num_layers + 1


def test_shapes_and_logits(model):
    ids, mask = model.tokenize(TEXTS, max_length=8)
    assert ids.shape == mask.shape and ids.shape[1] <= 8
    out = model.server_forward(model.embed(ids), mask)
    assert out.pooled.shape == (2, model.hidden_size)
    assert out.last_hidden.shape == (*ids.shape, model.hidden_size)
    if model.causal:
        assert out.logits.shape == (*ids.shape, model.vocab_size)
    else:
        assert out.logits is None


def test_encode_matches_padded_batch_row(model):
    """Padding must not change a text's pooled output (mask respected by the pooling)."""
    alone = model.encode(TEXTS[:1])
    batched = model.encode(TEXTS)
    torch.testing.assert_close(alone[0], batched[0], rtol=1e-4, atol=1e-5)


def test_embedding_table_and_space(model):
    space = model.as_space()
    assert space.size == model.vocab_size and space.dim == model.hidden_size
    ids, _ = model.tokenize(["good food"])
    torch.testing.assert_close(model.embed(ids)[0], model.embedding_table[ids[0]])
    assert "food" in space.index and "the" in space.stop_words
    assert space.tokens[space.index["food"]] == "food"


def test_seeded_build_is_reproducible():
    a, b, c = tiny_encoder(seed=1), tiny_encoder(seed=1), tiny_encoder(seed=2)
    assert torch.equal(a.embedding_table, b.embedding_table)
    assert not torch.equal(a.embedding_table, c.embedding_table)


def test_pooling_helpers():
    hidden = torch.arange(12, dtype=torch.float32).reshape(1, 4, 3).repeat(2, 1, 1)
    mask = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1]])
    torch.testing.assert_close(mean_pool(hidden, mask)[0], hidden[0, :2].mean(0))
    expected = torch.stack([hidden[0, 1], hidden[1, 3]])
    torch.testing.assert_close(last_token_pool(hidden, mask), expected)


def test_gradients_reach_client_embeddings():
    model = tiny_encoder()
    ids, mask = model.tokenize(TEXTS)
    emb = model.embed(ids)
    model.server_forward(emb, mask).pooled.sum().backward()
    assert model.input_embeddings.weight.grad is not None
    assert model.input_embeddings.weight.grad.abs().sum() > 0


def test_tokenize_rejects_bare_string():
    with pytest.raises(TypeError, match="list of texts"):
        tiny_encoder().tokenize("one string")


def test_load_model_by_name_through_plugins():
    from dpkit.models import load_model

    model = load_model("tiny-encoder", {"hidden_size": 8, "num_heads": 2}, device="cpu")
    assert isinstance(model, SplitModel) and model.hidden_size == 8
