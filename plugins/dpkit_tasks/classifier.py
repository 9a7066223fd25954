"""Utility classifier for privatized text: averaged word vectors or bag of words + logistic regression."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from dpkit import EmbeddingSpace, TrainingCurve, process_cache

MAX_ITER = 2000

_TRAINED = process_cache("tasks.text_classifiers",
                         "utility classifiers by (dataset, space fingerprints, features, seed)")


def doc_features(docs: list[torch.Tensor], space: EmbeddingSpace, kind: str) -> np.ndarray:
    """Features ``[N, F]`` of id sequences: ``mean_vectors`` (mean embedding) or ``bow`` (counts)."""
    ids = [d[d >= 0].cpu() for d in docs]  # a CUDA cell's server holds its messages on the GPU
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
                          space: EmbeddingSpace, kind: str,
                          seed: int) -> tuple[LogisticRegression, TrainingCurve]:
    """A logistic regression on clean training docs and its training curve, cached per process."""
    def train() -> tuple[LogisticRegression, TrainingCurve]:
        if labels is None or len(set(labels)) < 2:
            raise ValueError("utility: classifier needs a labelled train split with ≥ 2 classes; "
                             "use utility: none for unlabelled data")
        return fit_with_curve(doc_features(docs, space, kind), np.asarray(labels), seed)

    return _TRAINED.get_or_build(key, train)


def fit_with_curve(features, labels: np.ndarray, seed: int,
                   max_iter: int = MAX_ITER) -> tuple[LogisticRegression, TrainingCurve]:
    """Fit L-BFGS logistic regression, recording the training log-loss after 1, 2, 4, …
    iterations until the solver stops on its own tolerance (or at ``max_iter``).

    L-BFGS is deterministic, so the last fit is the model a single ``max_iter`` fit returns; the
    earlier, capped fits only draw the curve. Convergence is the solver's own verdict (stopped
    before ``max_iter``). There is no validation loss: every clean training document is used, and
    test documents never enter a curve.
    """
    curve = TrainingCurve("utility classifier", unit="lbfgs iteration")
    cap = 1
    while True:
        cap = min(cap, max_iter)
        model = LogisticRegression(max_iter=cap, C=1.0, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(features, labels)
        iterations = int(np.max(model.n_iter_))
        curve.add(iterations, log_loss(labels, model.predict_proba(features), labels=model.classes_))
        if iterations < cap or cap == max_iter:
            curve.solver_converged = iterations < max_iter
            return model, curve
        cap *= 2


def clear_classifiers() -> None:
    """Forget the classifiers trained in this process."""
    _TRAINED.clear()
