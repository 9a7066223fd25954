"""Planted-bug battery of the baseline mechanisms: sampler bugs in laplace_dx, text2text, SanText
and CusText — scale errors, noise reused across calls, a generator re-seeded before each draw —
caught by ``dpkit audit`` or the contract suite (``dpkit.testing.battery``)."""

from __future__ import annotations

from dpkit.testing import (
    Check,
    PlantedBug,
    contract_test,
    eta_times,
    mechanism_audit,
    replace,
    reseeded_each_draw,
    reused_across_calls,
    scale_result,
)

LAPLACE = "dpkit_baselines.laplace"


def _logits_times(factor: float):
    def make(original):
        return lambda logits, generator: original(logits * factor, generator)
    return make


PLANTED_BUGS = [
    PlantedBug("noise ×½ (radius halved)", "noise scaled", "laplace_dx",
               (scale_result(LAPLACE, "sample_laplace_noise", 0.5),)),
    PlantedBug("noise ×¼", "noise scaled", "laplace_dx",
               (scale_result(LAPLACE, "sample_laplace_noise", 0.25),)),
    PlantedBug("distances doubled (factor ½ of the exponent lost)", "sampler scale", "santext",
               (scale_result("dpkit_baselines.santext", "exact_pairwise_l2", 2.0),)),
    PlantedBug("sampling logits ×4 (declared law unchanged)", "sampler scale", "custext",
               (replace("dpkit_baselines.custext", "gumbel_argmax", _logits_times(4.0)),)),
    # issue 43: the token mechanisms' noise streams
    PlantedBug("sampler draws at 2η, release declares η", "sampler scale", "text2text",
               (eta_times(LAPLACE, "sample_laplace_noise", 2.0),)),
    PlantedBug("noise drawn once, reused across calls", "noise reused", "text2text",
               (reused_across_calls(LAPLACE, "sample_laplace_noise"),)),
    PlantedBug("noise drawn once, reused across calls", "noise reused", "laplace_dx",
               (reused_across_calls(LAPLACE, "sample_laplace_noise"),)),
    PlantedBug("generator re-seeded to 0 before each draw", "noise reused", "text2text",
               (reseeded_each_draw(LAPLACE, "sample_laplace_noise"),)),
    PlantedBug("generator re-seeded to 0 before each draw", "noise reused", "laplace_dx",
               (reseeded_each_draw(LAPLACE, "sample_laplace_noise"),)),
    PlantedBug("generator re-seeded to 0 before each draw", "noise reused", "santext",
               (reseeded_each_draw("dpkit_baselines.santext", "sample_by_id"),)),
    PlantedBug("generator re-seeded to 0 before each draw", "noise reused", "custext",
               (reseeded_each_draw("dpkit_baselines.custext", "gumbel_argmax"),)),
]
"""Sampler bugs of the baseline mechanisms."""

PARAMS = {"laplace_dx": {"eta": 5.0}, "text2text": {"eta": 5.0}, "santext": {"epsilon": 2.0},
          "custext": {"epsilon": 2.0, "top_k": 5}}


def battery_checks(samples: int = 2000, seed: int = 0) -> dict[str, list[Check]]:
    """The mechanism audit, then the contract's white-box law and independence tests."""
    return {name: [mechanism_audit(name, params, samples=samples, seed=seed),
                   contract_test(name, params, "test_noise_follows_declared_law"),
                   contract_test(name, params, "test_draws_are_independent")]
            for name, params in PARAMS.items()}
