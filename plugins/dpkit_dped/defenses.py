"""DPED and its baselines as registered defenses, all on the same corpora, vocabulary and metrics."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

import dpkit
from dpkit import DefenseResult, Release, attach_curves, declare_releases
from dpkit_dped.aggregation import aggregate
from dpkit_dped.pipeline import evaluate, prepare, public_model, teacher_models, teacher_outputs
from dpkit_dped.privacy import NoisePlan, hidden_sensitivity, noiseless_plan, plan_noise
from dpkit_dped.releases import query_releases, send_answers
from dpkit_dped.skipgram import WordModel
from dpkit_dped.student import train_student
from dpkit_dped.targets import hidden_targets, nonnegative, soft_targets


class CorpusParams(dpkit.Params):
    """Corpora, vocabulary and skip-gram settings shared by every DPED-family defense."""

    public_data: str = "news_articles"
    public_data_params: dict = Field(default_factory=dict)
    public_split: str = "train"
    max_public_docs: int | None = Field(None, ge=1)
    private_split: str = "train"
    heldout_split: str = "test"
    max_private_docs: int | None = Field(None, ge=1)
    heldout_pairs: int = Field(20000, ge=1)
    validation_share: float = Field(0.05, gt=0, lt=1)
    validation_pairs: int = Field(5000, ge=1)
    vocab_size: int = Field(3000, ge=10)
    min_count: int = Field(5, ge=1)
    dim: int = Field(100, ge=2)
    window: int = Field(5, ge=1)
    epochs: int = Field(5, ge=1)
    negative: int = Field(5, ge=1)
    workers: int = Field(1, ge=1, description=(
        "gensim threads; 1 (default) makes every model a function of the seed, more trains "
        "faster but gensim's threads race, so reruns of the same seed differ"))
    topic_data: str | None = "reuters_r8"
    topic_data_params: dict = Field(default_factory=dict)


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


class EnsembleParams(CorpusParams):
    """The teacher ensemble: N skip-grams on disjoint hashed shards of the private corpus."""

    teachers: int = Field(20, ge=2)
    teacher_epochs: int | None = Field(None, ge=1, description=(
        "epochs of each teacher (at most, with teacher_patience); None: `epochs`, as the public "
        "and non-private skip-grams"))
    teacher_patience: int | None = Field(None, ge=1, description=(
        "stop each teacher once the loss of documents held out of its own shard has not improved "
        "for this many epochs (of at most `epochs`) and keep its best epoch; None trains `epochs`"))
    teacher_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of each teacher's shard held out to stop on when teacher_patience is set"))


class TeacherParams(EnsembleParams):
    """Teacher ensemble, noisy aggregation and student settings (DPED and PATE)."""

    target_epsilon: float = Field(2.0, gt=0)
    noiseless: bool = Field(False, description=(
        "σ = 0 on every release: the pipeline's noiseless reference, recorded as ε = ∞ "
        "(target_epsilon is then unused)"))
    num_queries: int = Field(3000, ge=1)
    target: Literal["soft", "hard"] = Field("soft", description=(
        "soft: release the noisy sum of the teachers' probability vectors and train Eq. 4 against "
        "their noisy mean (§3.1: each teacher's output is a distribution); hard: release only "
        "the noisy argmax label (Alg. 1, line 26, read literally)"))
    shrinkage: Literal["wiener", "none"] = Field("wiener", description=(
        "post-processing of the noisy soft targets and hidden means: shrink each toward the "
        "public model's prediction by a Wiener factor of the known noise std (dpkit_dped.targets); "
        "none: use the releases as they are"))
    threshold: Literal["noisy", "faithful"] = "noisy"
    threshold_votes: float = Field(5.0, ge=0, description=(
        "r: a query is answered when the top entry of the teachers' summed outputs (votes, or "
        "probability mass under soft targets) plus N(0, σ₁²) reaches r"))
    share_threshold: float = Field(0.2, gt=0)
    share_votes: float = Field(0.2, gt=0)
    student_epochs: int = Field(20, ge=1)
    student_patience: int | None = Field(None, ge=1, description=(
        "stop the student once its loss on held-out released answers has not improved for this "
        "many epochs and keep its best epoch (the start included); None trains student_epochs"))
    student_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of the answered queries held out to stop on when student_patience is set"))
    student_keep_start_level: float | None = Field(0.05, gt=0, lt=1, description=(
        "the best held-out epoch replaces the student's start only if its held-out gain is "
        "significant at this one-sided level (mean gain > 0 and a Wilcoxon signed-rank test over "
        "held-out answers against their unbiased noisy targets, Bonferroni over the epochs "
        "compared); null: always"))
    student_lr: float = Field(0.02, gt=0)
    student_batch: int = Field(512, ge=1)
    output_loss: Literal["squared", "cross_entropy"] = "squared"
    student_init: Literal["random", "public"] = "random"


class DpedParams(TeacherParams):
    """DPED: adds the noisy mean of clipped teacher vectors."""

    clip: float = Field(1.0, gt=0)
    share_hidden: float = Field(0.6, gt=0)
    hidden_weight: float = Field(1.0, ge=0)
    output_weight: float = Field(1.0, ge=0, description=(
        "weight of Eq. 4's output term; 0 trains on the hidden channel alone (a measurement row)"))
    hidden_target: Literal["public_norm", "released"] = Field("public_norm", description=(
        "public_norm: the direction of the (shrunk) noisy mean at the public vector's length "
        "(post-processing: clipping to C shrinks the teachers' vectors); released: the noisy "
        "mean of clipped vectors as it is (the paper's H̃)"))


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
                        clip=getattr(p, "clip", 1.0), generator=ctx.generator("dped-noise"))
        kept, outputs, hidden_means = send_answers(
            ctx.wire, agg.answered, agg.soft if p.target == "soft" else agg.labels, agg.hidden)
        targets, informative_out = self.output_target(kept, outputs, plan, reference)
        unbiased = outputs / p.teachers if p.target == "soft" else outputs
        hidden, informative_hidden = self.hidden_target(kept, hidden_means, plan, reference)
        student = train_student(
            kept, hidden, targets, output_rows=informative_out, hidden_rows=informative_hidden,
            vocab_size=len(setup.vocab), dim=p.dim, epochs=p.student_epochs, lr=p.student_lr,
            batch_size=p.student_batch, hidden_weight=getattr(p, "hidden_weight", 0.0),
            output_weight=getattr(p, "output_weight", 1.0),
            loss_kind=p.output_loss, generator=ctx.generator("dped-student"),
            init=reference if p.student_init == "public" else None,
            validation=tuple(x.to(ctx.device) for x in setup.validation),
            patience=p.student_patience, holdout_share=p.student_holdout_share,
            held_targets=unbiased, keep_start_level=p.student_keep_start_level)
        if student.selection is not None:
            ctx.say(f"{self.name}: {student.selection.describe()}")
        metrics = evaluate(ctx, setup, student, p)
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

    def output_target(self, kept: torch.Tensor, outputs: torch.Tensor, plan: NoisePlan,
                      reference: WordModel) -> tuple[torch.Tensor, torch.Tensor]:
        """Labels (hard) or soft target rows of the answered queries ``kept``, from their received
        ``outputs`` alone, and which of them carry information."""
        p = self.params
        if p.target == "hard":
            return outputs, torch.ones(len(kept), dtype=torch.bool, device=kept.device)
        prior = reference.context_logits(kept).softmax(dim=-1) if p.shrinkage == "wiener" else None
        target, informative = soft_targets(outputs, p.teachers, plan.sigma_votes, prior)
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


class PateParams(TeacherParams):
    """PATE: the same teachers and queries, teacher outputs only."""

    share_votes: float = Field(0.8, gt=0)
    output_loss: Literal["squared", "cross_entropy"] = "cross_entropy"


class DpedPate(DpedDefense):
    """PATE baseline: the DPED teachers, Confident-GNMax on their outputs only, student on the
    output loss."""

    name = "dped_pate"
    Params = PateParams
    uses_hidden = False
