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
from dpkit_dped.evaluation import ensemble_perplexity
from dpkit_dped.pipeline import evaluate, nonprivate_model, prepare, public_model, teacher_models
from dpkit_dped.releases import MODEL, as_release, send_models
from dpkit_dped.params import EnsembleParams, NonPrivateParams

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

    Only its held-out perplexity is defined (it has no single word vectors). It is the ceiling a
    distilled student approaches without noise; the ledger records ε = ∞.
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
        centers, contexts = (x.to(ctx.device) for x in setup.heldout)
        metrics = {"perplexity": ensemble_perplexity(teachers, centers, contexts),
                   "teachers": float(len(teachers))}
        return with_curves(metrics, teachers)
