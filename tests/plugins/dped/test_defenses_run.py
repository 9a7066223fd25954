"""DPED's and PATE's run() wiring: the aggregator gets the plan at the run's settings, the
threshold, the clip and the run's secret noise stream, and what crosses is what it released."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped import defenses
from dpkit_dped.defenses import DpedDefense, DpedPate, privacy_settings
from dpkit_dped.pipeline import prepare, teacher_key
from dpkit_dped.releases import ANSWERS, HIDDEN, THRESHOLD
from dpkit_dped.selection import GainTest

from dpkit.boundary.session import tally

from .conftest import TEACHER

SECRET = "the aggregator's secret"


def spied_run(make_ctx, monkeypatch, cls, selected=False, **params):
    """(defense, ctx, result, what aggregate, send_answers, request_student and the reference
    scores were handed) of one run under SECRET."""
    calls: dict = {}
    aggregate, send_answers = defenses.aggregate, defenses.send_answers
    request_student, references = defenses.request_student, defenses.teacher_reference_scores

    def spy_aggregate(vectors, summed, plan, **kwargs):
        calls["aggregate"] = dict(kwargs, plan=plan, vectors=vectors, summed=summed,
                                  state=kwargs["generator"].get_state())
        calls["agg"] = aggregate(vectors, summed, plan, **kwargs)
        return calls["agg"]

    def spy_send_answers(wire, *args):
        calls["send"] = (wire, *args)
        return send_answers(wire, *args)

    def spy_request_student(wire):
        student, trained = request_student(wire)
        if selected:  # as if the held-out selection had kept an epoch (a tiny corpus keeps none)
            student.selection = GainTest(best_step=2, gain=0.25, p_value=0.01, compared=3,
                                         level=0.05)
        calls["student"] = student, trained
        return calls["student"]

    def spy_references(*args):
        calls["references"] = args
        return references(*args)

    monkeypatch.setattr(defenses, "request_student", spy_request_student)
    monkeypatch.setattr(defenses, "teacher_reference_scores", spy_references)
    monkeypatch.setattr(defenses, "aggregate", spy_aggregate)
    monkeypatch.setattr(defenses, "send_answers", spy_send_answers)
    defense = cls(cls.Params.model_validate({**TEACHER, **params}))
    ctx = make_ctx()
    ctx.noise_secret = SECRET
    result = defense.run(ctx)
    return defense, ctx, result, calls


@pytest.mark.parametrize("cls, target, selected", [(DpedDefense, "soft", True),
                                                   (DpedDefense, "hard", False),
                                                   (DpedPate, "soft", False)])
def test_the_aggregator_runs_the_plan_on_the_runs_secret_stream_and_its_release_crosses(
        make_ctx, monkeypatch, cls, target, selected):
    clip = {"clip": 0.7} if cls is DpedDefense else {}  # PATE clips nothing: no hidden means
    defense, ctx, result, calls = spied_run(make_ctx, monkeypatch, cls, target=target,
                                            selected=selected, **clip)
    call, agg = calls["aggregate"], calls["agg"]
    assert call["plan"] is defense.noise_plan(*privacy_settings(ctx))
    assert call["threshold"] == defense.params.threshold_votes and (call["clip"] == 0.7 or not clip)
    assert (call["vectors"] is None) == (cls is DpedPate)
    # each teacher adds one point of the simplex per query: its vote (hard) or its probabilities
    summed, teachers = call["summed"], defense.params.teachers
    torch.testing.assert_close(summed.sum(-1), torch.full((len(summed),), float(teachers)))
    assert bool((summed == summed.round()).all()) == (target == "hard")
    fresh = make_ctx()
    fresh.noise_secret = SECRET
    assert torch.equal(call["state"], fresh.noise_generator("dped-noise").get_state())
    assert not torch.equal(call["state"], fresh.generator("dped-noise").get_state())
    wire, answered, outputs, hidden = calls["send"]
    assert wire is ctx.wire and answered is agg.answered and hidden is agg.hidden
    assert outputs is (agg.soft if target == "soft" else agg.labels)
    assert ctx.wire.units[THRESHOLD] == len(agg.answered)
    assert ctx.wire.units[ANSWERS] == int(agg.answered.sum()) > 0
    assert (HIDDEN in ctx.wire.units) == (cls is DpedDefense)
    plan = defense.noise_plan(*privacy_settings(ctx))
    assert (result.metrics["sigma_votes"], result.metrics["sigma_threshold"],
            result.metrics["sigma_hidden"]) == (plan.sigma_votes, plan.sigma_threshold,
                                                plan.sigma_hidden or 0.0)
    assert result.metrics["num_queries"] == TEACHER["num_queries"]
    assert result.metrics["abstain_share"] == agg.abstain_share
    assert result.metrics["target_epsilon"] == defense.params.target_epsilon
    student, trained = calls["student"]  # what the server trained on what crossed
    assert (result.metrics["informative_outputs"], result.metrics["informative_hidden"]) == (
        trained["informative_outputs"], trained["informative_hidden"])
    selection = student.selection
    assert (selection is not None) == selected
    assert ((result.metrics.get("student_held_gain"), result.metrics.get("student_gain_p")) ==
            ((selection.gain, selection.p_value) if selection else (None, None)))
    scored_ctx, *_, key = calls["references"]  # the reference scores of this run's teachers
    assert scored_ctx is ctx and key == teacher_key(ctx, prepare(ctx, defense.params), defense.params)


def test_two_noise_secrets_send_different_releases(make_ctx):
    digests = []
    for secret in ("first", "second"):
        ctx = make_ctx()
        ctx.noise_secret = secret
        DpedDefense(DpedDefense.Params.model_validate(TEACHER)).run(ctx)
        digests.append(tally(ctx.wire.channel())["digests"])
    assert all(digests[0][name] != digests[1][name] for name in (ANSWERS, HIDDEN))


def test_a_noiseless_run_reports_no_target_epsilon(make_ctx):
    ctx = make_ctx()
    metrics = DpedDefense(DpedDefense.Params.model_validate({**TEACHER, "noiseless": True})
                          ).run(ctx).metrics
    assert "target_epsilon" not in metrics and metrics["sigma_votes"] == 0.0


def test_more_queries_than_public_words_is_refused_with_the_fix(make_ctx):
    params = DpedDefense.Params.model_validate(TEACHER)
    words = len(prepare(make_ctx(), params).vocab)
    with pytest.raises(ValueError, match=f"num_queries={words + 1} exceeds the public vocabulary "
                                         f"of {words} words; lower num_queries or raise vocab_size"):
        DpedDefense(DpedDefense.Params.model_validate({**TEACHER, "num_queries": words + 1})
                    ).run(make_ctx())
    DpedDefense(DpedDefense.Params.model_validate({**TEACHER, "num_queries": words})).run(make_ctx())
