"""Skip-gram word models: gensim training on a fixed public vocabulary, and safetensors caching."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from dpkit_dped.corpus import Vocabulary


@dataclass
class WordModel:
    """A skip-gram model over a vocabulary: input vectors ``[V, d]`` and output layer ``[V, d]`` (+ bias)."""

    vectors: torch.Tensor
    out_vectors: torch.Tensor
    out_bias: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> WordModel:
        """A copy on ``device``."""
        bias = None if self.out_bias is None else self.out_bias.to(device)
        return WordModel(self.vectors.to(device), self.out_vectors.to(device), bias)

    def context_logits(self, centers: torch.Tensor) -> torch.Tensor:
        """Unnormalized log-probabilities of every context word for each center id, ``[n, V]``."""
        logits = self.vectors[centers] @ self.out_vectors.T
        return logits if self.out_bias is None else logits + self.out_bias

    def save(self, path: Path) -> None:
        """Write the tensors to ``path`` (safetensors)."""
        tensors = {"vectors": self.vectors.cpu().contiguous(),
                   "out_vectors": self.out_vectors.cpu().contiguous()}
        if self.out_bias is not None:
            tensors["out_bias"] = self.out_bias.cpu().contiguous()
        save_file(tensors, str(path))

    @classmethod
    def load(cls, path: Path, device: torch.device | str = "cpu") -> WordModel:
        """Read a model written by :meth:`save`."""
        t = load_file(str(path), device=str(device))
        return cls(t["vectors"], t["out_vectors"], t.get("out_bias"))


def train_gensim(sents: list[list[str]], vocab: Vocabulary, *, dim: int, window: int, epochs: int,
                 negative: int, seed: int, workers: int = 2) -> WordModel:
    """Skip-gram with negative sampling (gensim, in C) on ``sents``, vocabulary fixed to ``vocab``.

    The vocabulary and its subsampling counts come from the public corpus, so nothing about the
    vocabulary depends on the private sentences; words never seen keep their seeded initial vectors.
    """
    from gensim.models import Word2Vec

    model = Word2Vec(vector_size=dim, window=window, sg=1, negative=negative, min_count=1,
                     seed=seed, workers=workers, epochs=epochs)
    model.build_vocab_from_freq(vocab.frequencies())
    total = sum(len(s) for s in sents)
    if total:
        model.train(sents, total_examples=len(sents), total_words=total, epochs=epochs)
    order = [model.wv.key_to_index[w] for w in vocab.words]
    vectors = torch.from_numpy(np.ascontiguousarray(model.wv.vectors[order], dtype=np.float32))
    out = torch.from_numpy(np.ascontiguousarray(model.syn1neg[order], dtype=np.float32))
    return WordModel(vectors, out)


def cache_key(*parts: object) -> str:
    """A short stable key for an artifact built from ``parts`` (params, fingerprints)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


_MEMO: dict[str, list[WordModel]] = {}


def cached_models(folder: Path, build: Callable[[], list[WordModel]]) -> list[WordModel]:
    """Models stored in ``folder`` (safetensors), built once with ``build`` when absent."""
    key = str(folder)
    if key in _MEMO:
        return _MEMO[key]
    done = folder / "complete.json"
    if done.exists():
        count = json.loads(done.read_text())["count"]
        models = [WordModel.load(folder / f"model_{i}.safetensors") for i in range(count)]
    else:
        models = build()
        for i, m in enumerate(models):
            m.save(folder / f"model_{i}.safetensors")
        done.write_text(json.dumps({"count": len(models)}))
    _MEMO[key] = models
    return models
