"""Planted-bug battery of the DPED family: bugs planted in the real aggregation, clipping and
DP-SGD code, and the audits and tests that must catch each (``dpkit.testing.battery``)."""

from __future__ import annotations

import math

from dpkit import DpGuarantee, Ledger
from dpkit.testing import (
    Check,
    PlantedBug,
    assertion_check,
    build_defense,
    defense_audit,
    replace,
    scale_draws,
    test_check,
)

AGG, SGD = "dpkit_dped.aggregation", "dpkit_dped.sgd"

SOFT = {"target_epsilon": 1.0, "num_queries": 300, "threshold_votes": 0.05}
"""specs/dped.yaml's teacher settings at its smallest ε and query budget (soft targets)."""
HARD = {"target_epsilon": 1.0, "num_queries": 3000, "target": "hard", "threshold_votes": 5.0}
"""specs/dped.yaml's hard-label rows (Alg. 1)."""
DPSGD = {"target_epsilon": 2.0, "steps": 200, "sampling_rate": 0.02, "dim": 16,
         "pairs_per_doc": 4, "max_grad_norm": 0.001}
"""Small DP-SGD (seconds per audit); C small so that clipping binds."""


def _no_clip(original):
    return lambda x, clip: x


def _ones(original):
    return lambda norms, max_norm: original(norms, max_norm) * 0 + 1


def _count_divided(by: int):
    def make(original):
        def spends(self, *args):
            return [(g, label, max(1, count // by)) for g, label, count in original(self, *args)]
        return spends
    return make


def _overlapping(original):
    """Each shard also takes the first document of the next one."""
    def partition(texts, num_shards, seed):
        shards = original(texts, num_shards, seed)
        return [s + shards[(i + 1) % len(shards)][:1] for i, s in enumerate(shards)]
    return partition


def _doubled(original):
    return lambda teachers, queries, chunk=1024: original(teachers, queries, chunk) * 2


def ledger_counts_every_query(defense: str, params: dict) -> None:
    """The ledger ε after recording the plan is at least the ε of num_queries queries, each
    releasing every channel at the plan's σ (composed independently of ``spends()``)."""
    import dp_accounting


    built = build_defense(defense, params)
    plan = built.noise_plan(1e-5, "rdp")
    ledger = Ledger(delta=1e-5, accountant="rdp")
    for guarantee, label, count in plan.spends():
        ledger.spend(guarantee, label, count=count)
    sigmas = [(plan.sigma_threshold, 1.0), (plan.sigma_votes, math.sqrt(2.0)),
              (plan.sigma_hidden, plan.hidden_sens)]
    event = dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(s / sens),
                                          built.params.num_queries)
        for s, sens in sigmas if s is not None])
    expected = Ledger(delta=1e-5, accountant="rdp")
    expected.spend(DpGuarantee(event), "independent composition")
    assert ledger.epsilon() >= expected.epsilon() * (1 - 1e-6), (
        f"{defense}: ledger ε={ledger.epsilon():.4g} but {built.params.num_queries} queries at "
        f"the plan's σ spend ε={expected.epsilon():.4g}")


PLANTED_BUGS = [
    *[PlantedBug(f"{what} noise ×¼", "noise scaled", target,
                 (scale_draws(AGG, 0.25, site=f"sigma_{site}"),))
      for target in ("dped", "dped_pate", "dped (hard)")
      for what, site in (("vote/soft-target", "votes"), ("threshold", "threshold"),
                         ("hidden-mean", "hidden"))
      if not (target == "dped_pate" and site == "hidden")],
    *[PlantedBug("threshold compared before its noise", "threshold before noise", target,
                 (scale_draws(AGG, 0.0, site="sigma_threshold"),))
      for target in ("dped", "dped_pate", "dped (hard)")],
    PlantedBug("hidden-mean clipping removed", "clipping removed", "dped",
               (replace(AGG, "clip_rows", _no_clip),)),
    PlantedBug("queries charged: a third (answered ones only)", "units or steps off", "dped_pate",
               (replace("dpkit_dped.privacy:NoisePlan", "spends", _count_divided(3)),)),
    PlantedBug("queries charged: half", "units or steps off", "dped",
               (replace("dpkit_dped.privacy:NoisePlan", "spends", _count_divided(2)),)),
    PlantedBug("DP-SGD noise ×¼", "noise scaled", "dped_dpsgd",
               (scale_draws(SGD, 0.25, site="noise_multiplier * max_grad_norm"),)),
    PlantedBug("DP-SGD noise std off by 1/√2", "sampler scale", "dped_dpsgd",
               (scale_draws(SGD, 1 / math.sqrt(2), site="noise_multiplier * max_grad_norm"),)),
    PlantedBug("per-document clipping removed", "clipping removed", "dped_dpsgd",
               (replace("dpkit_dped.clipping", "clip_factors", _ones),)),
    PlantedBug("steps charged: half of those trained", "units or steps off", "dped_dpsgd",
               (replace("dpkit_dped.dpsgd:DpedDpsgd", "spends_for", _count_divided(2)),)),
    PlantedBug("Poisson rate ×10 (the ledger charges q)", "sampling rate off", "dped_dpsgd",
               (scale_draws(SGD, 0.1, site="sampling_rate", sampler="rand"),)),
    PlantedBug("a document in two teachers' shards", "partition broken", "dped (teachers)",
               (replace("dpkit_dped.pipeline", "partition", _overlapping),)),
    PlantedBug("soft targets not normalised (×2)", "noise scaled", "dped (teachers)",
               (replace(AGG, "teacher_probability_sum", _doubled),)),
]
"""Every planted bug of the DPED family (target ``dped (hard)``: DPED with hard labels)."""


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audits and tests that must catch the bugs, per target."""
    return {
        "dped": [defense_audit("dped", SOFT, canaries=canaries, seed=seed),
                 assertion_check("ledger counts every query (dped)",
                               lambda: ledger_counts_every_query("dped", SOFT))],
        "dped (hard)": [defense_audit("dped", HARD, canaries=canaries, seed=seed)],
        "dped_pate": [defense_audit("dped_pate", SOFT, canaries=canaries, seed=seed),
                      assertion_check("ledger counts every query (dped_pate)",
                                    lambda: ledger_counts_every_query("dped_pate", SOFT))],
        "dped_dpsgd": [defense_audit("dped_dpsgd", DPSGD, canaries=min(canaries, 500), seed=seed)],
        "dped (teachers)": [test_check(
            "tests/plugins/dped/test_noise_laws.py::test_teacher_shards_are_disjoint_and_cover_the_corpus",
            "tests/plugins/dped/test_noise_laws.py::test_each_teacher_adds_one_point_of_the_simplex_per_query")],
    }
