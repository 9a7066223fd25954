"""DPED and its baselines as registered defenses, all on the same corpora, vocabulary and metrics."""

from __future__ import annotations

from typing import Literal

import dp_accounting
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import DpGuarantee, NoGuarantee
from dpkit.protocols import DefenseResult
from dpkit.training import attach_curves
from dpkit_dped.aggregation import aggregate, procrustes_align, teacher_votes
from dpkit_dped.pipeline import (
    evaluate,
    nonprivate_model,
    prepare,
    public_model,
    teacher_models,
)
from dpkit_dped.privacy import NoisePlan, hidden_sensitivity, plan_noise
from dpkit_dped.student import train_student

NONPRIVATE_REASON = "non-private baseline: skip-gram trained on the private corpus without noise"


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
    """Record every planned spend on the ledger — before anything private is released."""
    for guarantee, label, count in spends:
        ctx.ledger.spend(guarantee, label=label, count=count)


class TeacherParams(CorpusParams):
    """Teacher ensemble and noisy aggregation settings (DPED and PATE)."""

    target_epsilon: float = Field(2.0, gt=0)
    teachers: int = Field(20, ge=2)
    num_queries: int = Field(3000, ge=1)
    threshold: Literal["noisy", "faithful"] = "noisy"
    threshold_votes: float = Field(5.0, ge=0)
    share_threshold: float = Field(0.2, ge=0)
    share_votes: float = Field(0.2, gt=0)
    teacher_epochs: int | None = Field(None, ge=1, description=(
        "epochs of each teacher (at most, with teacher_patience); None: `epochs`, as the public "
        "and non-private skip-grams"))
    teacher_patience: int | None = Field(None, ge=1, description=(
        "stop each teacher once the loss of documents held out of its own shard has not improved "
        "for this many epochs (of at most `epochs`) and keep its best epoch; None trains `epochs`"))
    teacher_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of each teacher's shard held out to stop on when teacher_patience is set"))
    student_epochs: int = Field(20, ge=1)
    student_patience: int | None = Field(None, ge=1, description=(
        "stop the student once its loss on held-out released answers has not improved for this "
        "many epochs and keep its best epoch (the start included); None trains student_epochs"))
    student_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of the answered queries held out to stop on when student_patience is set"))
    student_lr: float = Field(0.02, gt=0)
    student_batch: int = Field(512, ge=1)
    output_loss: Literal["squared", "cross_entropy"] = "squared"
    student_init: Literal["random", "public"] = "random"


class DpedParams(TeacherParams):
    """DPED: adds the noisy mean of clipped teacher vectors."""

    clip: float = Field(1.0, gt=0)
    share_hidden: float = Field(0.6, gt=0)
    hidden_weight: float = Field(1.0, ge=0)


class DpedDefense(dpkit.Component):
    """DPED (Feng & Hong): N skip-gram teachers, noisy mean vectors + noisy votes, student on Eq. 3."""

    name = "dped"
    Params = DpedParams
    uses_hidden = True

    def noise_plan(self, delta: float, accountant: str) -> NoisePlan:
        """σ of each release, calibrated to the target ε for ``num_queries`` queries."""
        p = self.params
        shares = {"threshold": p.share_threshold, "votes": p.share_votes}
        sens = 0.0
        if self.uses_hidden:
            shares["hidden"], sens = p.share_hidden, hidden_sensitivity(p.clip, p.teachers)
        return plan_noise(target_epsilon=p.target_epsilon, delta=delta, accountant=accountant,
                          queries=p.num_queries, shares=shares,
                          noisy_threshold=p.threshold == "noisy", hidden_sens=sens)

    def planned_spends(self, privacy) -> list:
        """The ledger entries a run will record."""
        return self.noise_plan(privacy.delta, privacy.accountant).spends()

    def run(self, ctx) -> DefenseResult:
        """Train or load teachers, aggregate with noise, train the student, evaluate it."""
        p = self.params
        setup = prepare(ctx, p)
        if p.num_queries > len(setup.vocab):
            raise ValueError(f"{self.name}: num_queries={p.num_queries} exceeds the public vocabulary "
                             f"of {len(setup.vocab)} words; lower num_queries or raise vocab_size")
        plan = self.noise_plan(*privacy_settings(ctx))
        record(ctx, plan.spends())
        reference = public_model(ctx, setup, p)
        teachers = teacher_models(ctx, setup, p)
        queries = torch.arange(p.num_queries, device=ctx.device)
        ctx.say(f"{self.name}: aggregating {p.num_queries} queries over {len(teachers)} teachers")
        votes = teacher_votes(teachers, queries)
        vectors = None
        if self.uses_hidden:
            vectors = torch.stack([procrustes_align(t.vectors, reference.vectors)[:p.num_queries]
                                   for t in teachers])
        agg = aggregate(vectors, votes, len(setup.vocab), plan, threshold=p.threshold_votes,
                        clip=getattr(p, "clip", 1.0), generator=ctx.generator("dped-noise"))
        kept = agg.answered.nonzero().squeeze(1)
        student = train_student(
            kept, None if agg.hidden is None else agg.hidden[kept], agg.labels[kept],
            vocab_size=len(setup.vocab), dim=p.dim, epochs=p.student_epochs, lr=p.student_lr,
            batch_size=p.student_batch, hidden_weight=getattr(p, "hidden_weight", 0.0),
            loss_kind=p.output_loss, generator=ctx.generator("dped-student"),
            init=reference if p.student_init == "public" else None,
            validation=tuple(x.to(ctx.device) for x in setup.validation),
            patience=p.student_patience, holdout_share=p.student_holdout_share)
        metrics = evaluate(ctx, setup, student, p)
        metrics.update(target_epsilon=p.target_epsilon, num_queries=p.num_queries,
                       abstain_share=agg.abstain_share, sigma_votes=plan.sigma_votes,
                       sigma_threshold=plan.sigma_threshold or 0.0,
                       sigma_hidden=plan.sigma_hidden or 0.0)
        return with_curves(metrics, [student, reference, *teachers])


class PateParams(TeacherParams):
    """PATE: the same teachers and queries, labels only."""

    share_threshold: float = Field(0.2, ge=0)
    share_votes: float = Field(0.8, gt=0)
    output_loss: Literal["squared", "cross_entropy"] = "cross_entropy"


class DpedPate(DpedDefense):
    """PATE baseline: the DPED teachers, Confident-GNMax labels only, student on the output loss."""

    name = "dped_pate"
    Params = PateParams
    uses_hidden = False


class NonPrivateParams(CorpusParams):
    """Non-private skip-gram (no extra settings)."""


class DpedNonPrivate(dpkit.Component):
    """Non-private baseline: one skip-gram on the whole private corpus; ledger records ε = ∞."""

    name = "dped_nonprivate"
    Params = NonPrivateParams

    def planned_spends(self, privacy) -> list:
        """One NoGuarantee entry."""
        return [(NoGuarantee(NONPRIVATE_REASON), "non-private skip-gram", 1)]

    def run(self, ctx) -> DefenseResult:
        """Train (or load) the model and evaluate it."""
        record(ctx, self.planned_spends(None))
        setup = prepare(ctx, self.params)
        model = nonprivate_model(ctx, setup, self.params)
        return with_curves(evaluate(ctx, setup, model, self.params), [model])


class DpedPublic(DpedNonPrivate):
    """Public-only floor: skip-gram on the public corpus alone; touches no private text (ε = 0)."""

    name = "dped_public"

    def planned_spends(self, privacy) -> list:
        """One no-op entry: nothing private is used, so ε = 0."""
        return [(DpGuarantee(dp_accounting.NoOpDpEvent()), "public corpus only (no private data)", 1)]

    def run(self, ctx) -> DefenseResult:
        """Train (or load) the public model and evaluate it."""
        record(ctx, self.planned_spends(None))
        setup = prepare(ctx, self.params)
        model = public_model(ctx, setup, self.params)
        return with_curves(evaluate(ctx, setup, model, self.params), [model])

