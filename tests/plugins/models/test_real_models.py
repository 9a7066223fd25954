"""Built-in models loaded from their real pinned artifacts."""

import pytest
import torch

from dpkit.base.errors import ParamsError
from dpkit.contract.registry import Registry
import dpkit_models
from dpkit_models import catalogue as C

pytestmark = pytest.mark.network
CPU = torch.device("cpu")
SENTENCES = ["A man is eating food.", "A man is eating a piece of bread."]


def build(name: str, **params):
    reg = Registry()
    dpkit_models.dpkit_register_models(lambda cls, **how: reg.add("model", cls, "models", **how))
    return reg.build("model", name, params)


@pytest.fixture(scope="module")
def minilm():
    return build("minilm").load(CPU)


def test_glove_6b_loads_400k_by_50():
    space = build("glove-6b-50d").load(CPU)
    assert (space.size, space.dim) == (400000, 50) and space.vectors.dtype == torch.float32
    assert space.tokens[:3] == ["the", ",", "."] and "the" in space.stop_words
    small = build("glove-6b-50d", max_vocab=1000).load(CPU)
    assert small.size == 1000 and torch.equal(small.vectors, space.vectors[:1000])
    king, queen, man, woman = (space.vectors[space.index[w]] for w in
                               ("king", "queen", "man", "woman"))
    guess = king - man + woman
    sims = torch.nn.functional.cosine_similarity(space.vectors[:5000], guess[None])
    top = [space.tokens[i] for i in sims.topk(3).indices]
    assert "queen" in top


def test_glove_840b_filtered_loads():
    space = build("glove-840b-300d").load(CPU)
    assert (space.size, space.dim) == (33860, 300) and space.lowercase
    again = build("glove-840b-300d", max_vocab=100).load(CPU)  # from the safetensors cache
    assert torch.equal(again.vectors, space.vectors[:100])


def test_minilm_reproduces_published_similarity(minilm):
    emb = minilm.encode(SENTENCES, normalize=True)
    cosine = float(emb[0] @ emb[1])
    assert cosine == pytest.approx(0.755, abs=0.005)


def test_minilm_split_forward_equals_unsplit(minilm):
    ids, mask = minilm.tokenize(SENTENCES + ["short"])
    split = minilm.server_forward(minilm.embed(ids), mask)
    whole = minilm.forward_ids(ids, mask)
    torch.testing.assert_close(split.pooled, whole.pooled, rtol=0, atol=0)
    assert len(split.hidden_states) == 7 and split.pooled.shape == (3, 384)
    assert minilm.embedding_table.shape == (30522, 384)
    space = minilm.as_space()
    assert space.tokens[space.index["bread"]] == "bread" and space.lowercase


def test_hf_loads_a_local_folder(minilm):
    folder = C.MiniLM.artifact.path(C.MiniLM.inner)
    model = build("hf", path=str(folder)).load(CPU)
    assert not model.causal
    torch.testing.assert_close(model.encode(SENTENCES[:1]), minilm.encode(SENTENCES[:1]))


def test_hf_params_need_exactly_one_source():
    with pytest.raises(ParamsError, match="exactly one of path or hub_id"):
        build("hf")
    with pytest.raises(ParamsError, match="exactly one of path or hub_id"):
        build("hf", path="x", hub_id="y")


@pytest.mark.slow
def test_smollm2_gguf_predicts_paris():
    model = build("smollm2-135m").load(CPU)
    assert model.causal
    assert (model.num_layers, model.hidden_size, model.vocab_size) == (30, 576, 49152)
    ids, mask = model.tokenize(["The capital of France is"])
    out = model.server_forward(model.embed(ids), mask)
    torch.testing.assert_close(out.logits, model.forward_ids(ids, mask).logits, rtol=0, atol=0)
    assert model.decode(out.logits[:, -1].argmax(-1, keepdim=True))[0].strip() == "Paris"
