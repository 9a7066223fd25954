"""Reference rows of the DPED family: what a private method is measured against.

``dped_public`` (the floor of the teacher methods: gensim on the public corpus), ``dped_nonprivate``
(gensim on the private corpus) and ``dped_ensemble`` (the teachers' averaged predictive
distribution: what a noiseless student can at best learn from them). Only the floor touches no
private text; the other two are recorded as ε = ∞.
"""

from __future__ import annotations

import dp_accounting

import dpkit
from dpkit import DefenseResult, DpGuarantee, NoGuarantee, Release, declare_releases
from dpkit_dped.defenses import with_curves
from dpkit_dped.params import EnsembleParams, NonPrivateParams
from dpkit_dped.pipeline import (
    evaluate,
    nonprivate_model,
    prepare,
    public_model,
    teacher_key,
    teacher_models,
)
from dpkit_dped.releases import MODEL, as_release, send_models
from dpkit_dped.scores import recovered_gains, teacher_reference_scores

NONPRIVATE_REASON = "non-private baseline: skip-gram trained on the private corpus without noise"
ENSEMBLE_REASON = ("reference: the teachers' averaged predictive distribution, computed from the "
                   "private shards without noise")


def model_releases(spends: list) -> list[Release]:
    """The one ``model`` release of a reference row's single planned spend (unit: send)."""
    (spend,) = spends
    return [as_release(MODEL, spend, unit="send")]


class DpedNonPrivate(dpkit.Component):
    """Non-private baseline: one skip-gram on the whole private corpus; ledger records ε = ∞."""

    name = "dped_nonprivate"
    Params = NonPrivateParams

    def planned_spends(self, privacy) -> list:
        """One NoGuarantee entry."""
        return [(NoGuarantee(NONPRIVATE_REASON), "non-private skip-gram", 1)]

    def releases(self, ctx) -> list[Release]:
        """The trained model crosses the wire once, under the one planned entry."""
        return model_releases(self.planned_spends(None))

    def run(self, ctx) -> DefenseResult:
        """Train (or load) the model, send it, and evaluate what was received."""
        declare_releases(self, ctx)
        setup = prepare(ctx, self.params)
        (model,) = send_models(ctx.wire, [nonprivate_model(ctx, setup, self.params)])
        return with_curves(evaluate(ctx, setup, model, self.params), [model])


class DpedPublic(DpedNonPrivate):
    """Public-only floor: skip-gram on the public corpus alone; touches no private text (ε = 0)."""

    name = "dped_public"

    def planned_spends(self, privacy) -> list:
        """One no-op entry: nothing private is used, so ε = 0."""
        return [(DpGuarantee(dp_accounting.NoOpDpEvent()), "public corpus only (no private data)", 1)]

    def run(self, ctx) -> DefenseResult:
        """Train (or load) the public model, send it, and evaluate what was received."""
        declare_releases(self, ctx)
        setup = prepare(ctx, self.params)
        (model,) = send_models(ctx.wire, [public_model(ctx, setup, self.params)])
        return with_curves(evaluate(ctx, setup, model, self.params), [model])


class DpedEnsemble(dpkit.Component):
    """The teacher ensemble as a predictor: the mean of the N teachers' softmax distributions.

    Only its held-out perplexities are defined (it has no single word vectors): raw and
    calibrated, as every model's (:mod:`dpkit_dped.scores`). It is the ceiling a distilled student
    approaches without noise (``ensemble_gain_recovered`` = 1 by definition); the ledger records
    ε = ∞.
    """

    name = "dped_ensemble"
    Params = EnsembleParams

    def planned_spends(self, privacy) -> list:
        """One NoGuarantee entry."""
        return [(NoGuarantee(ENSEMBLE_REASON), "teacher ensemble (noiseless)", 1)]

    def releases(self, ctx) -> list[Release]:
        """The teachers cross the wire once (one send), under the one planned entry."""
        return model_releases(self.planned_spends(None))

    def run(self, ctx) -> DefenseResult:
        """Train (or load) the teachers, send them, and score their averaged distribution."""
        declare_releases(self, ctx)
        p = self.params
        setup = prepare(ctx, p)
        teachers = send_models(ctx.wire, teacher_models(ctx, setup, p))
        references = teacher_reference_scores(ctx, setup, p, public_model(ctx, setup, p), teachers,
                                              teacher_key(ctx, setup, p))
        metrics = {**references["ensemble"], "teachers": float(len(teachers))}
        metrics.update(recovered_gains(metrics, references))
        return with_curves(metrics, teachers)
