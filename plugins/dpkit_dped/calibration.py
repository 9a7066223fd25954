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


class Predictor:
    """A model's ``[V, V]`` log-probabilities log q(c | w), prepared for the bias fit.

    The fit needs Σ_c q(c | w)·e^{b_c} per center word. With q kept as exp(log q − a), a = each
    context's largest log-probability, that is one matrix-vector product and no context's column
    underflows (Alg. 1's hard-label students reach log q ≈ −1,000); where a whole row still
    underflows the sums are taken in the log domain instead (a softmax of the whole matrix).
    """

    def __init__(self, log_probs: torch.Tensor):
        if bool(torch.isnan(log_probs).any()) or bool((log_probs == math.inf).any()):
            raise ValueError("the model's log-probabilities hold NaN or +inf; a calibrated "
                             "perplexity needs a distribution over contexts for every center word")
        self.log_probs = log_probs.double()
        self.offset = self.log_probs.max(dim=0).values.clamp_min(-1e300)
        self.scaled = (self.log_probs - self.offset).exp()

    def log_norm(self, bias: torch.Tensor) -> torch.Tensor:
        """log Σ_c q(c | w)·e^{b_c} of every center word w ``[V]``."""
        shifted = bias + self.offset
        top = shifted.max()
        norm = self.scaled @ (shifted - top).exp()
        if bool((norm > 0).all()):
            return norm.log() + top
        return torch.logsumexp(self.log_probs + bias, dim=-1)

    def expected(self, centers: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """Expected count of every context word ``[V]`` when center w occurs ``centers[w]`` times:
        E = e^b ⊙ qᵀ(n ⊘ q e^b), two matrix-vector products."""
        shifted = bias + self.offset
        scale = (shifted - shifted.max()).exp()
        norm = self.scaled @ scale
        if bool((norm > 0).all()):
            return scale * (self.scaled.T @ (centers / norm))
        log_norm = torch.logsumexp(self.log_probs + bias, dim=-1, keepdim=True)
        return (centers.unsqueeze(1) * (self.log_probs + bias - log_norm).exp()).sum(0)

    def objective(self, n: torch.Tensor, m: torch.Tensor, bias: torch.Tensor) -> float:
        """The fit's negative log-likelihood up to a constant: Σ_w n_w log Z_w(b) − Σ_c m_c b_c."""
        return float((n * self.log_norm(bias)).sum() - (m * bias).sum())


def fit_output_bias(log_probs: torch.Tensor | Predictor, margins: Margins, *,
                    start: torch.Tensor | None = None, tolerance: float = 1e-4,
                    max_iterations: int = 1000) -> torch.Tensor:
    """The bias b ``[V]`` maximising the sample's likelihood under ``log_probs + b`` (module doc).

    Generalised iterative scaling, b ← b + α·log(m / E), from ``start`` (default 0): α = 1 always
    lowers the convex objective; a longer step (α doubling up to 64) is kept while it lowers it
    further, which cuts the iterations of ill-conditioned (nearly collapsed) models tenfold. Stops
    once every expected context count is within a factor 1 ± ``tolerance`` of the observed one, or
    after ``max_iterations`` with the best bias found (:func:`count_mismatch` says how far off).
    """
    model = log_probs if isinstance(log_probs, Predictor) else Predictor(log_probs)
    n, m = _counts(margins)
    bias = torch.zeros(len(m), dtype=torch.float64) if start is None else start.double().clone()
    value, alpha = model.objective(n, m, bias), 1.0
    for _ in range(max_iterations):
        step = (m / model.expected(n, bias)).log()
        if float(step.abs().max()) < tolerance:
            break
        while True:
            trial = model.objective(n, m, bias + alpha * step)
            if trial <= value or alpha == 1.0:
                break
            alpha = 1.0
        bias, value, alpha = bias + alpha * step, trial, min(2 * alpha, 64.0)
    return bias - bias.mean()


def _counts(margins: Margins) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, m) as the fit uses them: the pseudo-counts keep the totals equal, as the fixed point needs."""
    n = margins.centers.double().cpu()
    m = margins.contexts.double().cpu() + PSEUDO_COUNT
    return n, m * (n.sum() / m.sum())


def count_mismatch(log_probs: torch.Tensor | Predictor, margins: Margins,
                   bias: torch.Tensor) -> float:
    """The largest |log(expected / observed)| context count under ``log_probs + bias`` (0 at the
    exact fit)."""
    model = log_probs if isinstance(log_probs, Predictor) else Predictor(log_probs)
    n, m = _counts(margins)
    return float((model.expected(n, bias.double()) / m).log().abs().max())


def heldout_perplexity(log_probs: torch.Tensor | Predictor, centers: torch.Tensor,
                       contexts: torch.Tensor, bias: torch.Tensor | None = None) -> float:
    """exp of the mean cross-entropy of the held-out pairs under ``log_probs`` (+ ``bias``,
    renormalised per center word)."""
    if isinstance(log_probs, Predictor):
        model, raw = log_probs, log_probs.log_probs
    else:
        model, raw = None, log_probs.double()
    centers, contexts = centers.cpu(), contexts.cpu()
    picked = raw[centers, contexts]
    if bias is not None:
        model = model if model is not None else Predictor(raw)
        picked = picked + bias.double()[contexts] - model.log_norm(bias.double())[centers]
    return math.exp(-float(picked.mean()))


def calibrated_perplexities(log_probs: torch.Tensor, heldout: tuple[torch.Tensor, torch.Tensor],
                            samples: dict[str, Margins]) -> dict[str, float]:
    """The held-out perplexity of ``log_probs`` once calibrated on each named sample (each fit
    started from the previous one's bias), and ``calibration_mismatch``: the worst fit's
    :func:`count_mismatch` (below the fit's tolerance, 1e-4, unless it ran out of iterations: a
    hard-label student collapsed on one hub word, perplexity 1.8·10⁶, ends at 3e-4 after 1,000,
    its perplexity within 1e-6 of what 5,000 give)."""
    model = Predictor(log_probs)
    out, bias, worst = {}, None, 0.0
    for name, margins in samples.items():
        bias = fit_output_bias(model, margins, start=bias)
        out[name] = heldout_perplexity(model, *heldout, bias)
        worst = max(worst, count_mismatch(model, margins, bias))
    out["calibration_mismatch"] = worst
    return out


def recovered_share(floor: float, model: float, ceiling: float) -> float:
    """The share of the ceiling's gain over the floor that ``model`` recovers (perplexities: lower
    is better); NaN when the ceiling does not beat the floor."""
    gain = floor - ceiling
    return (floor - model) / gain if gain > 0 else math.nan
