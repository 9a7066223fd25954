"""DPED and its baselines as registered defenses, all on the same corpora, vocabulary and metrics."""

from __future__ import annotations

import torch

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
from dpkit_dped.privacy import (
    NoisePlan,
    hidden_sensitivity,
    noiseless_plan,
    paper_plan,
    plan_noise,
)
from dpkit_dped.heldout import fission
from dpkit_dped.releases import query_releases, send_answers
from dpkit_dped.scores import recovered_gains, teacher_reference_scores
from dpkit_dped.skipgram import WordModel
from dpkit_dped.student import train_student
from dpkit_dped.targets import hidden_targets, nonnegative, soft_targets


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
    uses_hidden = True

    def noise_plan(self, delta: float, accountant: str) -> NoisePlan:
        """σ of each release, calibrated to the target ε for ``num_queries`` queries (all 0 when
        ``noiseless``); calibrated once per (δ, accountant)."""
        known = self.__dict__.setdefault("_plans", {})
        if (delta, accountant) not in known:
            known[delta, accountant] = self._calibrate(delta, accountant)
        return known[delta, accountant]

    def _calibrate(self, delta: float, accountant: str) -> NoisePlan:
        p = self.params
        shares = {"threshold": p.share_threshold, "votes": p.share_votes}
        sens = 0.0
        if self.uses_hidden:
            shares["hidden"], sens = p.share_hidden, hidden_sensitivity(p.clip, p.teachers)
        if p.noiseless:
            return noiseless_plan(p.num_queries, hidden=self.uses_hidden, hidden_sens=sens,
                                  target=p.target)
        if p.accounting == "paper":
            return paper_plan(epsilon_per_query=p.target_epsilon, delta=delta,
                              accountant=accountant, queries=p.num_queries, hidden_sens=sens,
                              teachers=p.teachers, clip=getattr(p, "clip", 1.0), target=p.target)
        return plan_noise(target_epsilon=p.target_epsilon, delta=delta, accountant=accountant,
                          queries=p.num_queries, shares=shares,
                          noisy_threshold=p.threshold == "noisy", hidden_sens=sens, target=p.target)

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.noise_plan(privacy.delta, privacy.accountant).spends()

    def releases(self, ctx) -> list[Release]:
        """What the aggregator sends the student (:mod:`dpkit_dped.releases`), one per planned spend."""
        return query_releases(self.noise_plan(*privacy_settings(ctx)))

    def run(self, ctx) -> DefenseResult:
        """Train or load teachers, aggregate with noise, send the answers, train the student on
        what it received, evaluate it."""
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
        kept, outputs, hidden_means = send_answers(
            ctx.wire, agg.answered, agg.soft if p.target == "soft" else agg.labels, agg.hidden)
        targets, informative_out = self.output_target(kept, outputs, plan, reference)
        held, fold = self.held_out_targets(kept, outputs, plan, reference, ctx)
        hidden, informative_hidden = self.hidden_target(kept, hidden_means, plan, reference)
        student = train_student(
            kept, hidden, targets, output_rows=informative_out, hidden_rows=informative_hidden,
            vocab_size=len(setup.vocab), dim=p.dim, epochs=p.student_epochs, lr=p.student_lr,
            batch_size=p.student_batch, hidden_weight=getattr(p, "hidden_weight", 0.0),
            output_weight=getattr(p, "output_weight", 1.0),
            loss_kind=p.output_loss, generator=ctx.generator("dped-student"),
            init=reference if p.student_init == "public" else None,
            patience=p.student_patience, holdout_share=p.student_holdout_share,
            held_targets=held, fold_targets=fold, keep_start_level=p.student_keep_start_level,
            finish=p.student_finish)
        if student.selection is not None:
            ctx.say(f"{self.name}: {student.selection.describe()}")
        metrics = evaluate(ctx, setup, student, p)
        metrics.update(recovered_gains(metrics, teacher_reference_scores(
            ctx, setup, p, reference, teachers, teacher_key(ctx, setup, p))))
        if student.selection is not None:
            metrics.update(student_held_gain=student.selection.gain,
                           student_gain_p=student.selection.p_value)
        metrics.update(num_queries=p.num_queries, abstain_share=agg.abstain_share,
                       informative_outputs=float(informative_out.sum()),
                       informative_hidden=float(informative_hidden.sum()),
                       sigma_votes=plan.sigma_votes, sigma_threshold=plan.sigma_threshold or 0.0,
                       sigma_hidden=plan.sigma_hidden or 0.0)
        if not p.noiseless:
            metrics["target_epsilon"] = p.target_epsilon
        return with_curves(metrics, [student, reference, *teachers])

    def held_out_targets(self, kept: torch.Tensor, outputs: torch.Tensor, plan: NoisePlan,
                         reference: WordModel, ctx) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(scoring targets, fold-in targets or None) of the answers the student may hold out:
        soft answers are split by Gaussian data fission (:mod:`dpkit_dped.heldout`) into an
        unbiased half to score and a half post-processed as the training targets are, to fold
        in; hard labels are scored as they are, without fold-in."""
        p = self.params
        if p.target == "hard":
            return outputs, None
        fold, score = fission(outputs / p.teachers, plan.sigma_votes / p.teachers,
                              ctx.generator("dped-fission"))
        return score, self.output_target(kept, fold * p.teachers, plan, reference,
                                         noise_scale=2 ** 0.5)[0]

    def output_target(self, kept: torch.Tensor, outputs: torch.Tensor, plan: NoisePlan,
                      reference: WordModel, noise_scale: float = 1.0
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Labels (hard) or soft target rows of the answered queries ``kept``, from their received
        ``outputs`` alone (summed outputs whose noise std is ``noise_scale`` × the plan's), and
        which of them carry information."""
        p = self.params
        if p.target == "hard":
            return outputs, torch.ones(len(kept), dtype=torch.bool, device=kept.device)
        prior = reference.context_logits(kept).softmax(dim=-1) if p.shrinkage == "wiener" else None
        target, informative = soft_targets(outputs, p.teachers, plan.sigma_votes * noise_scale,
                                           prior)
        return (nonnegative(target) if p.output_loss == "cross_entropy" else target), informative

    def hidden_target(self, kept: torch.Tensor, hidden_means: torch.Tensor | None, plan: NoisePlan,
                      reference: WordModel) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The student's hidden targets of the answered queries ``kept`` (``None`` without a hidden
        release) and which of them carry information."""
        if hidden_means is None:
            return None, torch.zeros(len(kept), dtype=torch.bool, device=kept.device)
        p = self.params
        return hidden_targets(hidden_means, reference.vectors[kept], clip=p.clip,
                              noise_std=plan.sigma_hidden or 0.0,
                              shrink=p.shrinkage == "wiener",
                              rescale=p.hidden_target == "public_norm")


class DpedPate(DpedDefense):
    """PATE baseline: the DPED teachers, Confident-GNMax on their outputs only, student on the
    output loss."""

    name = "dped_pate"
    Params = PateParams
    uses_hidden = False
