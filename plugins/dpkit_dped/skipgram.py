"""Skip-gram word models: gensim training on a fixed public vocabulary, and safetensors caching."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from dpkit import TrainingCurve, Validation, fit_epochs, process_cache
from dpkit_dped.corpus import Vocabulary
from dpkit_dped.selection import GainTest


@dataclass
class WordModel:
    """A skip-gram model over a vocabulary: input vectors ``[V, d]`` and output layer ``[V, d]`` (+ bias)."""

    vectors: torch.Tensor
    out_vectors: torch.Tensor
    out_bias: torch.Tensor | None = None
    curve: TrainingCurve | None = None
    selection: GainTest | None = None  # a student's choice of epoch; None elsewhere

    def to(self, device: torch.device | str) -> WordModel:
        """A copy on ``device`` (the training curve is shared)."""
        bias = None if self.out_bias is None else self.out_bias.to(device)
        return WordModel(self.vectors.to(device), self.out_vectors.to(device), bias, self.curve)

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


def stable_hash(text: str) -> int:
    """A hash of ``text`` that does not depend on ``PYTHONHASHSEED`` (gensim's ``hashfxn``)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def validation_loss(vectors: np.ndarray, out_vectors: np.ndarray, pairs, chunk: int = 4096) -> float:
    """Mean full-softmax cross-entropy (log perplexity) of (center, context) id ``pairs``."""
    centers, contexts = (np.asarray(x) for x in pairs)
    total = 0.0
    for s in range(0, len(centers), chunk):
        logits = vectors[centers[s:s + chunk]] @ out_vectors.T
        top = logits.max(axis=1, keepdims=True)
        lse = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        total += float((lse - logits[np.arange(len(logits)), contexts[s:s + chunk]]).sum())
    return total / max(len(centers), 1)


def train_gensim(sents: list[list[str]], vocab: Vocabulary, *, dim: int, window: int, epochs: int,
                 negative: int, seed: int, workers: int = 1, validation=None,
                 component: str = "skip-gram", probe_pairs: int = 5000,
                 patience: int | None = None, holdout=None) -> WordModel:
    """Skip-gram with negative sampling (gensim, in C) on ``sents``, vocabulary fixed to ``vocab``.

    The vocabulary and its subsampling counts come from the public corpus, so nothing about the
    vocabulary depends on the private sentences; words never seen keep their seeded initial vectors.
    With ``workers=1`` the result depends only on ``seed`` (gensim's threads race otherwise).
    The returned model carries its per-epoch curve: the mean full-softmax cross-entropy of up to
    ``probe_pairs`` (center, context) pairs drawn from ``sents`` (training loss; gensim's own loss
    counter is cumulative float32 and unreliable) and of the ``validation`` id pairs when given.

    With ``patience``, training runs epoch by epoch on gensim's linear learning-rate schedule and
    stops once the loss of the ``holdout`` id pairs has not improved for ``patience`` epochs,
    keeping the best epoch's vectors; the curve's validation loss is then the holdout loss and the
    ``validation`` loss is recorded as its ``val_metric`` (a diagnostic, never used to stop).
    """
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    from dpkit_dped.corpus import skipgram_pairs

    curve = TrainingCurve(component)
    total = sum(len(s) for s in sents)
    index = vocab.index
    docs = [np.array([index[w] for w in s], dtype=np.int64) for s in sents]
    probe = (skipgram_pairs(docs, window, probe_pairs, np.random.default_rng(seed))
             if any(len(d) > 1 for d in docs) else None)
    model = Word2Vec(vector_size=dim, window=window, sg=1, negative=negative, min_count=1,
                     seed=seed, workers=workers, epochs=epochs, hashfxn=stable_hash)
    model.build_vocab_from_freq(vocab.frequencies())
    order = [model.wv.key_to_index[w] for w in vocab.words]

    class Record(CallbackAny2Vec):
        def on_epoch_end(self, model):
            vec, out = model.wv.vectors[order], model.syn1neg[order]
            curve.add(len(curve.steps) + 1, validation_loss(vec, out, probe),
                      math.nan if validation is None else validation_loss(vec, out, validation))

    if total and probe is not None and patience is not None:
        return _train_stopping(model, sents, total, order, epochs, patience, probe, holdout,
                               validation, curve)
    if total and probe is not None:
        model.train(sents, total_examples=len(sents), total_words=total, epochs=epochs,
                    callbacks=[Record()])
    vectors = torch.from_numpy(np.ascontiguousarray(model.wv.vectors[order], dtype=np.float32))
    out = torch.from_numpy(np.ascontiguousarray(model.syn1neg[order], dtype=np.float32))
    return WordModel(vectors, out, curve=curve)


def _train_stopping(model, sents, total: int, order: list[int], epochs: int, patience: int,
                    probe, holdout, validation, curve: TrainingCurve) -> WordModel:
    """Epoch-by-epoch training that keeps the vectors of the best ``holdout`` loss."""
    if holdout is None or len(holdout[0]) == 0:
        raise ValueError("early stopping a skip-gram needs holdout (center, context) pairs; hold "
                         "out documents the stopping loss can be measured on, or set patience to None")
    start, end = model.alpha, model.min_alpha
    current = _Vectors()

    def train_epoch(epoch: int) -> float:
        model.train(sents, total_examples=len(sents), total_words=total, epochs=1,
                    start_alpha=start - (start - end) * (epoch - 1) / epochs,
                    end_alpha=start - (start - end) * epoch / epochs)
        current.hold(model.wv.vectors[order], model.syn1neg[order])
        return validation_loss(*current.arrays, probe)

    def validate() -> Validation:
        held = validation_loss(*current.arrays, holdout)
        return Validation(held, math.nan if validation is None else
                          validation_loss(*current.arrays, validation))

    fit_epochs(curve, epochs, train_epoch, validate, modules=(current,), patience=patience)
    if validation is not None:
        curve.val_metric_name = "private_validation_log_perplexity (diagnostic)"
    else:
        curve.val_metric = []
    return WordModel(current.vectors.clone(), current.out.clone(), curve=curve)


class _Vectors(torch.nn.Module):
    """A gensim model's current (input, output) vectors held as buffers, so that the loop's
    early stopping can snapshot the best epoch's and put them back."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("vectors", torch.empty(0))
        self.register_buffer("out", torch.empty(0))
        self.arrays: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))

    def hold(self, vectors: np.ndarray, out: np.ndarray) -> None:
        """Hold copies of ``vectors`` and ``out`` (float32)."""
        self.arrays = (vectors.copy(), out.copy())
        self.vectors = torch.from_numpy(np.ascontiguousarray(self.arrays[0], dtype=np.float32))
        self.out = torch.from_numpy(np.ascontiguousarray(self.arrays[1], dtype=np.float32))


def cache_key(*parts: object) -> str:
    """A short stable key for an artifact built from ``parts`` (params, fingerprints)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


_MEMO = process_cache("dped.word_models", "trained word models by their cache folder",
                      max_entries=16)  # per seed: teachers, public and non-private models


def cached_models(folder: Path, build: Callable[[], list[WordModel]]) -> list[WordModel]:
    """Models stored in ``folder`` (safetensors), built once with ``build`` when absent."""
    return _MEMO.get_or_build(str(folder), lambda: _load_or_build(folder, build))


def _load_or_build(folder: Path, build: Callable[[], list[WordModel]]) -> list[WordModel]:
    done = folder / "complete.json"
    if done.exists():
        meta = json.loads(done.read_text())
        models = [WordModel.load(folder / f"model_{i}.safetensors") for i in range(meta["count"])]
        for m, c in zip(models, meta.get("curves", [])):
            m.curve = TrainingCurve.from_dict(c)
    else:
        models = build()
        for i, m in enumerate(models):
            m.save(folder / f"model_{i}.safetensors")
        curves = [m.curve.to_dict() for m in models if m.curve is not None]
        done.write_text(json.dumps({"count": len(models), "curves": curves}))
    return models
