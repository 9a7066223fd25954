"""Utility metrics of a word model: perplexity, word similarity, analogies, topic accuracy, quintiles."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import spearmanr

from dpkit_dped.aggregation import procrustes_align
from dpkit_dped.corpus import Vocabulary, tokenize
from dpkit_dped.skipgram import WordModel


def perplexity(model: WordModel, centers: torch.Tensor, contexts: torch.Tensor, chunk: int = 4096) -> float:
    """exp of the mean cross-entropy of held-out context words under the full softmax."""
    total = 0.0
    for s in range(0, len(centers), chunk):
        logits = model.context_logits(centers[s:s + chunk])
        total += float(torch.nn.functional.cross_entropy(logits, contexts[s:s + chunk], reduction="sum"))
    return math.exp(total / max(len(centers), 1))


def pair_spearman(vectors: torch.Tensor, vocab: Vocabulary,
                  pairs: list[tuple[str, str, float]]) -> tuple[float, float]:
    """Spearman ρ between cosine similarity and human scores on in-vocabulary pairs, and coverage."""
    idx = vocab.index
    kept = [(idx[a], idx[b], s) for a, b, s in pairs if a in idx and b in idx]
    if len(kept) < 3:
        return float("nan"), len(kept) / max(len(pairs), 1)
    a, b, human = (torch.tensor(col) for col in zip(*kept))
    unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
    cos = (unit[a.to(unit.device)] * unit[b.to(unit.device)]).sum(-1).cpu().numpy()
    rho = spearmanr(cos, human.numpy()).statistic
    return float(rho), len(kept) / len(pairs)


def analogy_accuracy(vectors: torch.Tensor, vocab: Vocabulary,
                     questions: list[tuple[str, str, str, str]], chunk: int = 2048) -> tuple[float, int]:
    """3CosAdd accuracy (a:b :: c:?, excluding a, b, c) on in-vocabulary questions, and their count."""
    idx = vocab.index
    q = [[idx[w] for w in row] for row in questions if all(w in idx for w in row)]
    if not q:
        return float("nan"), 0
    ids = torch.tensor(q, device=vectors.device)
    unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
    correct = 0
    for s in range(0, len(ids), chunk):
        a, b, c, d = ids[s:s + chunk].T
        scores = (unit[b] - unit[a] + unit[c]) @ unit.T
        rows = torch.arange(len(a), device=ids.device)
        for col in (a, b, c):
            scores[rows, col] = float("-inf")
        correct += int((scores.argmax(-1) == d).sum())
    return correct / len(ids), len(ids)


def bag_matrix(texts: list[str], vocab: Vocabulary):
    """Row-normalized document × vocabulary count matrix (scipy sparse)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.preprocessing import normalize

    cv = CountVectorizer(vocabulary=vocab.index, tokenizer=tokenize, lowercase=False,
                         token_pattern=None)
    return normalize(cv.transform(texts), norm="l1")


def topic_accuracy(vectors: torch.Tensor, train: tuple, test: tuple, seed: int) -> float:
    """Accuracy of logistic regression on averaged (unit-normalized) word vectors of each document.

    ``train`` and ``test`` are (bag matrix from :func:`bag_matrix`, labels).
    """
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    unit = torch.nn.functional.normalize(vectors.float(), dim=-1).cpu().numpy()
    x_train = np.asarray(train[0] @ unit)
    x_test = np.asarray(test[0] @ unit)
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-8
    clf = LogisticRegression(max_iter=300, random_state=seed)
    with threadpool_limits(1):  # two BLAS threads on a busy machine cost 20× the CPU, same fit
        clf.fit((x_train - mu) / sd, train[1])
    return float(clf.score((x_test - mu) / sd, test[1]))


def quintile_similarity(vectors: torch.Tensor, reference: torch.Tensor,
                        counts: torch.Tensor) -> list[float]:
    """Mean cosine to the non-private ``reference`` per private-frequency quintile (rarest first, App. C).

    ``vectors`` is first rotated onto ``reference`` (orthogonal Procrustes), since two skip-gram
    spaces are only comparable up to rotation.
    """
    aligned = procrustes_align(vectors.float(), reference.float())
    cos = torch.nn.functional.cosine_similarity(aligned, reference.float(), dim=-1)
    order = torch.argsort(counts.to(cos.device), stable=True)
    return [float(part.mean()) for part in torch.tensor_split(cos[order], 5)]
