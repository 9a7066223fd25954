"""What each DPED-family defense sends across ``ctx.wire``, declared from its planned spends.

Central DP has the same boundary as a split model: a trusted side (the private corpus, the
teachers, the aggregator, DP-SGD's clipped per-document gradients) and an untrusted side (the
student, the released model). Everything that crosses it is sent with ``ctx.wire.send`` and
counted by the wire, and each release is declared before anything is sent, one ledger entry
each, taken from the component's ``planned_spends`` — so ``dpkit budget spec`` plans exactly the
declared entries, and the wire checks that a run sends no more than they cover (any excess is
recorded as ε = ∞):

- DPED / PATE: ``threshold`` — the noisy answered-or-abstained flag of every query, one row per
  query asked; ``answers`` — the noisy summed outputs (soft) or noisy labels (hard) of the
  answered queries, one row each; ``hidden_means`` — DPED's noisy means of clipped teacher vectors
  of the answered queries. Each is declared for ``num_queries`` rows (every query is charged,
  answered or not).
- DP-SGD and its twins: ``noisy_gradient`` — one send per training step.
- Reference rows (non-private, public, ensemble): ``model`` — the trained model, one send.

DPED and PATE then ask the server for the ``student`` (a request: nothing is sent), which it trains
from these releases and public inputs alone, and DP-SGD for the ``trained_model`` its server
trained by applying the noisy gradients (:mod:`dpkit_dped.server`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from dpkit import Release, TrainingCurve
from dpkit_dped.selection import GainTest
from dpkit_dped.skipgram import WordModel

THRESHOLD, ANSWERS, HIDDEN = "threshold", "answers", "hidden_means"
GRADIENT, MODEL = "noisy_gradient", "model"
STUDENT, TRAINED = "student", "trained_model"


def as_release(name: str, spend: tuple, *, unit: str = "row", covers: int | None = None) -> Release:
    """The release of one planned ``(guarantee, label, count)`` spend, sent under ``name``."""
    guarantee, label, count = spend
    return Release(name, guarantee, label, count, covers=covers, unit=unit)


def query_releases(plan) -> list[Release]:
    """The releases of a DPED / PATE noise plan (:class:`dpkit_dped.privacy.NoisePlan`), one per
    planned spend and in the same order. Every valid plan has a threshold entry (noisy, or ∞ when
    faithful or noiseless) and an answers entry, and a hidden one when it plans hidden means."""
    spends = plan.spends()
    names = [THRESHOLD, ANSWERS] + ([HIDDEN] if plan.sigma_hidden is not None else [])
    if len(names) != len(spends):
        raise ValueError(f"a DPED noise plan with {len(spends)} spends cannot name its channels "
                         f"{names}: NoisePlan.spends() and query_releases() disagree")
    return [as_release(name, spend) for name, spend in zip(names, spends)]


def send_answers(wire, answered: torch.Tensor, outputs: torch.Tensor,
                 hidden: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Send the aggregator's releases to the student: every query's answered flag, then the
    outputs and hidden means of the answered queries only. Returns what crossed (the wire's codec
    is lossless): (answered query ids, their outputs, their hidden means or None)."""
    wire.send(THRESHOLD, answered)
    kept = answered.nonzero().squeeze(1)
    outputs = outputs[kept].clone()
    wire.send(ANSWERS, outputs)
    if hidden is not None:
        hidden = hidden[kept].clone()
        wire.send(HIDDEN, hidden)
    return kept, outputs, hidden


def gradient_sender(wire):
    """A DP-SGD ``release`` hook: each step's noisy gradients cross the wire as one send."""

    def release(grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        sent = torch.stack(list(grads))
        wire.send(GRADIENT, sent)
        return list(sent.unbind(0))

    return release


def send_models(wire, models: Sequence[WordModel]) -> list[WordModel]:
    """Send trained models (input and output vectors) as one send; returns them as they crossed."""
    tensors = [t for m in models for t in (m.vectors, m.out_vectors)]
    sent = torch.stack(tensors)
    wire.send(MODEL, sent)
    crossed = sent.unbind(0)
    return [replace(m, vectors=crossed[2 * i], out_vectors=crossed[2 * i + 1])
            for i, m in enumerate(models)]


def request_student(wire) -> tuple[WordModel, dict[str, Any]]:
    """Ask the server for the student it trained on the releases; returns the student (with its
    curve and epoch choice) and the server's other numbers (how many targets were informative)."""
    answer = dict(wire.send(STUDENT))
    curve, selection = answer.pop("curve"), answer.pop("selection")
    model = WordModel(answer.pop("vectors"), answer.pop("out_vectors"), answer.pop("out_bias"))
    model.curve = None if curve is None else TrainingCurve.from_dict(curve)
    model.selection = None if selection is None else GainTest(**selection)
    return model, answer


def request_trained(wire, curve: TrainingCurve | None = None) -> WordModel:
    """Ask DP-SGD's server for the model it trained from the gradients that crossed (with the
    client's training ``curve``)."""
    answer = wire.send(TRAINED)
    model = WordModel(answer["vectors"], answer["out_vectors"])
    model.curve = curve
    return model
