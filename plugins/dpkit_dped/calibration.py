"""Calibrated held-out perplexity: every model scored after one output-bias vector fitted the same way.

A skip-gram's full-softmax perplexity mostly measures how well it knows the **unigram
frequencies** of the context words: gensim's negative-sampling logits approximate a shifted PMI
with no log p(context) term, so a model without an output bias is scored mostly on a calibration
it was never trained for. The evaluator therefore gives every model ``p(c | w) ∝ q(c | w)·e^{b_c}``
with one bias vector b fitted by maximum likelihood on a calibration sample, and scores the held-out
pairs under the calibrated model. Only b is fitted — one number per context word, no interaction
with the center word — so every model gets the same unigram knowledge and the score isolates what
it knows about contexts. The fit is an evaluation step, never released.

The likelihood of a sample of (center, context) pairs under ``log q + b`` depends on the sample
only through how often each word occurs as a center (n_w) and as a context (m_c):
``Σ_w n_w·logsumexp(L_w + b) − Σ_c m_c·b_c`` plus a constant. It is convex in b; its minimiser
matches every context word's expected count to its observed count, which generalised iterative
scaling (b_c ← b_c + log(m_c / E_c), each pair having exactly one context feature) reaches
monotonically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dpkit_dped.skipgram import WordModel

PSEUDO_COUNT = 0.5  # added to every context count so that a word never seen keeps a finite bias


@dataclass(frozen=True)
class Margins:
    """A calibration sample, by what the bias fit reads of it: center counts n and context counts m."""

    centers: torch.Tensor  # [V] float64
    contexts: torch.Tensor  # [V] float64

    @property
    def pairs(self) -> float:
        """Number of (center, context) pairs in the sample."""
        return float(self.centers.sum())


def window_margins(docs: list[np.ndarray], window: int, vocab_size: int) -> Margins:
    """Center and context counts of every pair within ``window`` of each other (both directions),
    the pairs :func:`dpkit_dped.corpus.skipgram_pairs` draws from: a word at position i of a
    document of length L is the center of min(i, window) + min(L − 1 − i, window) pairs."""
    ids, weights = [np.zeros(0, np.int64)], [np.zeros(0)]
    for doc in docs:
        pos = np.arange(len(doc))
        ids.append(doc)
        weights.append(np.minimum(pos, window) + np.minimum(len(doc) - 1 - pos, window))
    counts = np.bincount(np.concatenate(ids), np.concatenate(weights).astype(np.float64),
                         minlength=vocab_size)
    total = torch.from_numpy(counts)
    return Margins(total, total.clone())  # every pair is counted in both directions


def pair_margins(centers: torch.Tensor, contexts: torch.Tensor, vocab_size: int) -> Margins:
    """Center and context counts of explicit (center, context) id pairs."""
    ones = torch.ones(len(centers), dtype=torch.float64)
    zero = torch.zeros(vocab_size, dtype=torch.float64)
    return Margins(zero.index_add(0, centers.cpu(), ones), zero.index_add(0, contexts.cpu(), ones))


def center_log_probs(model: WordModel, chunk: int = 1024) -> torch.Tensor:
    """log q(c | w) of every context word c for every center word w, ``[V, V]`` float64."""
    vocab = model.vectors.shape[0]
    ids = torch.arange(vocab, device=model.vectors.device)
    return torch.cat([model.context_logits(ids[s:s + chunk]).double().log_softmax(-1).cpu()
                      for s in range(0, vocab, chunk)])


def mixture_log_probs(models: list[WordModel]) -> torch.Tensor:
    """log of the models' averaged distributions (the teacher ensemble as one predictor), ``[V, V]``."""
    total = center_log_probs(models[0])
    for m in models[1:]:
        total = torch.logaddexp(total, center_log_probs(m))
    return total - math.log(len(models))


def fit_output_bias(log_probs: torch.Tensor, margins: Margins, *, start: torch.Tensor | None = None,
                    tolerance: float = 1e-5, max_iterations: int = 1000,
                    probs: torch.Tensor | None = None) -> torch.Tensor:
    """The bias b ``[V]`` maximising the sample's likelihood under ``log_probs + b`` (module doc).

    Iterates b_c ← b_c + log(m_c / E_c) from ``start`` (default 0) until every expected context
    count is within a factor ``1 ± tolerance`` of the observed one; raises if that takes more than
    ``max_iterations``. With q = exp(log_probs), E = e^b ⊙ qᵀ(n ⊘ q e^b): two matrix-vector
    products per iteration (``probs``: q, when the caller has it already).
    """
    probs = log_probs.double().exp() if probs is None else probs
    n = margins.centers.double().to(probs.device)
    m = margins.contexts.double().to(probs.device) + PSEUDO_COUNT
    m = m * (n.sum() / m.sum())  # the pseudo-counts keep the totals equal, as the fixed point needs
    bias = torch.zeros(probs.shape[1], dtype=torch.float64, device=probs.device) if start is None \
        else start.double().to(probs.device).clone()
    for _ in range(max_iterations):
        scale = (bias - bias.max()).exp()
        expected = scale * (probs.T @ (n / (probs @ scale)))
        step = (m / expected).log()
        bias = bias + step
        if float(step.abs().max()) < tolerance:
            return bias - bias.mean()
    raise RuntimeError(f"the output-bias fit did not converge in {max_iterations} iterations "
                       f"(largest log-ratio {float(step.abs().max()):.3g}); the model's "
                       "log-probabilities may hold -inf or NaN")


def heldout_perplexity(log_probs: torch.Tensor, centers: torch.Tensor, contexts: torch.Tensor,
                       bias: torch.Tensor | None = None, probs: torch.Tensor | None = None) -> float:
    """exp of the mean cross-entropy of the held-out pairs under ``log_probs`` (+ ``bias``,
    renormalised per center word; ``probs``: exp(log_probs), when the caller has it already)."""
    centers, contexts = centers.cpu(), contexts.cpu()
    picked = log_probs[centers, contexts].double()
    if bias is not None:
        shift = bias.double().max()
        probs = log_probs.double().exp() if probs is None else probs
        norm = (probs @ (bias.double() - shift).exp()).log() + shift
        picked = picked + bias.double()[contexts] - norm[centers]
    return math.exp(-float(picked.mean()))


def calibrated_perplexities(log_probs: torch.Tensor, heldout: tuple[torch.Tensor, torch.Tensor],
                            samples: dict[str, Margins]) -> dict[str, float]:
    """The held-out perplexity of ``log_probs`` once calibrated on each named sample (each fit
    started from the previous one's bias)."""
    out, bias, probs = {}, None, log_probs.double().exp()
    for name, margins in samples.items():
        bias = fit_output_bias(log_probs, margins, start=bias, probs=probs)
        out[name] = heldout_perplexity(log_probs, *heldout, bias, probs=probs)
    return out


def recovered_share(floor: float, model: float, ceiling: float) -> float:
    """The share of the ceiling's gain over the floor that ``model`` recovers (perplexities: lower
    is better); NaN when the ceiling does not beat the floor."""
    gain = floor - ceiling
    return (floor - model) / gain if gain > 0 else math.nan
