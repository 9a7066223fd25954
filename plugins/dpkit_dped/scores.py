"""The perplexity metrics of a DPED-family cell: raw, calibrated, and the calibration's robustness.

Every model is scored on the same held-out pairs of the private test split four ways:

- ``perplexity``: raw full-softmax perplexity (what the model's own logits say);
- ``perplexity_calibrated`` (the headline): after one output bias fitted by the evaluator on the
  pairs of half A of the private training documents (an evaluation step, never released);
- ``perplexity_calibrated_alt``: the same fit on the other half, B — the robustness check: a
  verdict that moves between the two depends on the calibration sample;
- ``perplexity_public_bias``: the bias fitted on the public corpus's pairs (what ε = 0
  post-processing of a released model could do; it pulls every model toward the public domain).

The halves are cut by a keyed hash of each document; see :mod:`dpkit_dped.calibration`.
"""

from __future__ import annotations

import torch

from dpkit import process_cache
from dpkit_dped.calibration import (
    Margins,
    calibrated_perplexities,
    center_log_probs,
    heldout_perplexity,
    mixture_log_probs,
    recovered_share,
    window_margins,
)
from dpkit_dped.corpus import encode
from dpkit_dped.skipgram import WordModel

SAMPLES = {"perplexity_calibrated": "private training documents, half A",
           "perplexity_calibrated_alt": "private training documents, half B",
           "perplexity_public_bias": "public corpus"}
HEADLINE = "perplexity_calibrated"
RECOVERED = {"ensemble_gain_recovered": "perplexity_calibrated",
             "ensemble_gain_recovered_alt": "perplexity_calibrated_alt"}

_SAMPLES = process_cache("dped.calibration_samples", "center/context counts of the calibration "
                         "samples by setup", max_entries=4)


def calibration_samples(ctx, setup, p) -> dict[str, Margins]:
    """The three calibration samples of ``setup`` (metric name → its pair counts), memoized."""
    from dpkit_dped.pipeline import split_validation

    def build() -> dict[str, Margins]:
        half_b, half_a = split_validation(setup.private_texts, 0.5,
                                          ctx.numpy_seed("dped-calibration"))
        texts = {"perplexity_calibrated": half_a, "perplexity_calibrated_alt": half_b,
                 "perplexity_public_bias": setup.public_texts}
        return {name: window_margins(encode(t, setup.vocab), p.window, len(setup.vocab))
                for name, t in texts.items()}

    return _SAMPLES.get_or_build((setup.key, "calibration", p.window), build)


def log_prob_scores(ctx, setup, p, log_probs: torch.Tensor) -> dict[str, float]:
    """Raw and calibrated held-out perplexities of a predictor given as ``[V, V]`` log-probabilities."""
    heldout = setup.heldout
    out = {"perplexity": heldout_perplexity(log_probs, *heldout)}
    out.update(calibrated_perplexities(log_probs, heldout, calibration_samples(ctx, setup, p)))
    return out


def model_scores(ctx, setup, p, model: WordModel) -> dict[str, float]:
    """:func:`log_prob_scores` of one word model."""
    return log_prob_scores(ctx, setup, p, center_log_probs(model))


_REFERENCES = process_cache("dped.reference_scores", "perplexities of the public start and the "
                            "teacher ensemble by teachers", max_entries=8)


def teacher_reference_scores(ctx, setup, p, public: WordModel, teachers: list[WordModel],
                             key: str) -> dict[str, dict[str, float]]:
    """Scores of the public start and of the teacher ensemble (the floor and ceiling of a
    distilled student), memoized by the teachers' cache ``key``."""
    def build() -> dict[str, dict[str, float]]:
        return {"public": model_scores(ctx, setup, p, public),
                "ensemble": log_prob_scores(ctx, setup, p, mixture_log_probs(teachers))}

    return _REFERENCES.get_or_build(key, build)


def recovered_gains(scores: dict[str, float], references: dict[str, dict[str, float]]
                    ) -> dict[str, float]:
    """The share of the ensemble's calibrated gain over the public start that ``scores`` recover
    (1: the ensemble's perplexity, 0: the start's), on each calibration sample."""
    floor, ceiling = references["public"], references["ensemble"]
    return {name: recovered_share(floor[metric], scores[metric], ceiling[metric])
            for name, metric in RECOVERED.items()}
