"""DPED and its baselines as registered defenses, all on the same corpora, vocabulary and metrics."""

from __future__ import annotations


import dpkit
from dpkit import DefenseResult, Release, attach_curves, declare_releases
from dpkit_dped.aggregation import aggregate
from dpkit_dped.params import DpedParams, PateParams
from dpkit_dped.pipeline import (
    evaluate,
    prepare,
    public_model,
    teacher_key,
    teacher_models,
    teacher_outputs,
)
from dpkit_dped.plans import calibrate
from dpkit_dped.privacy import NoisePlan
from dpkit_dped.releases import query_releases, request_student, send_answers
from dpkit_dped.scores import recovered_gains, teacher_reference_scores
from dpkit_dped.server import PateStudentServer, StudentServer


def privacy_settings(ctx) -> tuple[float, str]:
    """(δ, accountant) of this run: from ``ctx.privacy``, else the ledger, else (1e-5, rdp)."""
    if ctx.privacy is not None:
        return float(ctx.privacy.delta), str(ctx.privacy.accountant)
    return float(getattr(ctx.ledger, "delta_target", 1e-5)), str(getattr(ctx.ledger, "accountant", "rdp"))


def with_curves(metrics: dict[str, float], models) -> DefenseResult:
    """A result whose metrics carry the convergence flag of every trained model (first = evaluated)."""
    result = DefenseResult(metrics)
    attach_curves(result, [m.curve for m in models if m.curve is not None])
    return result


def record(ctx, spends) -> None:
    """Record planned spends on the ledger directly (the audits' path; defenses declare releases)."""
    for guarantee, label, count in spends:
        ctx.ledger.spend(guarantee, label=label, count=count)


class DpedDefense(dpkit.Component):
    """DPED (Feng & Hong): N skip-gram teachers, noisy mean vectors + noisy teacher outputs, student
    on Eq. 3."""

    name = "dped"
    Params = DpedParams
    server = StudentServer
    uses_hidden = True

    def noise_plan(self, delta: float, accountant: str) -> NoisePlan:
        """σ of each release, calibrated to the target ε for ``num_queries`` queries (all 0 when
        ``noiseless``); calibrated once per (δ, accountant)."""
        known = self.__dict__.setdefault("_plans", {})
        if (delta, accountant) not in known:
            known[delta, accountant] = calibrate(self.params, self.uses_hidden, delta, accountant)
        return known[delta, accountant]

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.noise_plan(privacy.delta, privacy.accountant).spends()

    def releases(self, ctx) -> list[Release]:
        """What the aggregator sends the student (:mod:`dpkit_dped.releases`), one per planned spend."""
        return query_releases(self.noise_plan(*privacy_settings(ctx)))

    def run(self, ctx) -> DefenseResult:
        """Train or load teachers, aggregate with noise, send the answers; the server trains the
        student on what it received (:mod:`dpkit_dped.server`); evaluate the student."""
        declare_releases(self, ctx)
        p = self.params
        setup = prepare(ctx, p)
        if p.num_queries > len(setup.vocab):
            raise ValueError(f"{self.name}: num_queries={p.num_queries} exceeds the public vocabulary "
                             f"of {len(setup.vocab)} words; lower num_queries or raise vocab_size")
        plan = self.noise_plan(*privacy_settings(ctx))
        reference = public_model(ctx, setup, p)
        teachers = teacher_models(ctx, setup, p)
        ctx.say(f"{self.name}: aggregating {p.num_queries} queries over {len(teachers)} teachers "
                f"({p.target} targets)")
        summed, vectors = teacher_outputs(ctx, setup, p, soft=p.target == "soft",
                                          hidden=self.uses_hidden)
        agg = aggregate(vectors, summed, plan, threshold=p.threshold_votes,
                        clip=getattr(p, "clip", 1.0), generator=ctx.noise_generator("dped-noise"))
        send_answers(ctx.wire, agg.answered, agg.soft if p.target == "soft" else agg.labels,
                     agg.hidden)
        student, trained = request_student(ctx.wire)
        if student.selection is not None:
            ctx.say(f"{self.name}: {student.selection.describe()}")
        metrics = evaluate(ctx, setup, student, p)
        metrics.update(recovered_gains(metrics, teacher_reference_scores(
            ctx, setup, p, reference, teachers, teacher_key(ctx, setup, p))))
        if student.selection is not None:
            metrics.update(student_held_gain=student.selection.gain,
                           student_gain_p=student.selection.p_value)
        metrics.update(num_queries=p.num_queries, abstain_share=agg.abstain_share,
                       informative_outputs=trained["informative_outputs"],
                       informative_hidden=trained["informative_hidden"],
                       sigma_votes=plan.sigma_votes, sigma_threshold=plan.sigma_threshold or 0.0,
                       sigma_hidden=plan.sigma_hidden or 0.0)
        if not p.noiseless:
            metrics["target_epsilon"] = p.target_epsilon
        return with_curves(metrics, [student, reference, *teachers])


class DpedPate(DpedDefense):
    """PATE baseline: the DPED teachers, Confident-GNMax on their outputs only, student on the
    output loss."""

    name = "dped_pate"
    Params = PateParams
    server = PateStudentServer
    uses_hidden = False
