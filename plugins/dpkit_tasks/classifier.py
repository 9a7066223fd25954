"""Utility classifier for privatized text: averaged word vectors or bag of words + logistic regression."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from dpkit.cache import process_cache
from dpkit.space import EmbeddingSpace

_TRAINED = process_cache("tasks.text_classifiers",
                         "utility classifiers by (dataset, space fingerprints, features, seed)")


def doc_features(docs: list[torch.Tensor], space: EmbeddingSpace, kind: str) -> np.ndarray:
    """Features ``[N, F]`` of id sequences: ``mean_vectors`` (mean embedding) or ``bow`` (counts)."""
    ids = [d[d >= 0] for d in docs]
    lengths = torch.tensor([len(d) for d in ids])
    flat = torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long)
    doc_of = torch.repeat_interleave(torch.arange(len(ids)), lengths)
    if kind == "mean_vectors":
        vectors = space.vectors.detach().float().cpu()[flat]
        sums = torch.zeros(len(ids), space.dim).index_add_(0, doc_of, vectors)
        return (sums / lengths.clamp_min(1).unsqueeze(1)).numpy()
    if kind == "bow":
        from scipy.sparse import csr_matrix

        counts = csr_matrix((np.ones(len(flat)), (doc_of.numpy(), flat.numpy())),
                            shape=(len(ids), space.size))
        counts.data = np.log1p(counts.data)
        return counts
    raise ValueError(f"classifier features must be 'mean_vectors' or 'bow', got {kind!r}")


def train_text_classifier(key: tuple, docs: list[torch.Tensor], labels: list[int],
                          space: EmbeddingSpace, kind: str, seed: int) -> LogisticRegression:
    """A logistic regression on clean training docs, cached per process under ``key``."""
    def train() -> LogisticRegression:
        if labels is None or len(set(labels)) < 2:
            raise ValueError("utility: classifier needs a labelled train split with ≥ 2 classes; "
                             "use utility: none for unlabelled data")
        model = LogisticRegression(max_iter=2000, C=1.0, random_state=seed)
        model.fit(doc_features(docs, space, kind), np.asarray(labels))
        return model

    return _TRAINED.get_or_build(key, train)


def clear_classifiers() -> None:
    """Forget the classifiers trained in this process."""
    _TRAINED.clear()
