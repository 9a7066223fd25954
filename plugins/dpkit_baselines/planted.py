"""Planted-bug battery of the baseline mechanisms: sampler bugs in laplace_dx, SanText and
CusText, caught by ``dpkit audit`` (``dpkit.testing.battery``)."""

from __future__ import annotations

from dpkit.testing import Check, PlantedBug, mechanism_audit, replace, scale_result


def _logits_times(factor: float):
    def make(original):
        return lambda logits, generator: original(logits * factor, generator)
    return make


PLANTED_BUGS = [
    PlantedBug("noise ×½ (radius halved)", "noise scaled", "laplace_dx",
               (scale_result("dpkit_baselines.laplace", "sample_laplace_noise", 0.5),)),
    PlantedBug("noise ×¼", "noise scaled", "laplace_dx",
               (scale_result("dpkit_baselines.laplace", "sample_laplace_noise", 0.25),)),
    PlantedBug("distances doubled (factor ½ of the exponent lost)", "sampler scale", "santext",
               (scale_result("dpkit_baselines.santext", "exact_pairwise_l2", 2.0),)),
    PlantedBug("sampling logits ×4 (declared law unchanged)", "sampler scale", "custext",
               (replace("dpkit_baselines.custext", "gumbel_argmax", _logits_times(4.0)),)),
]
"""Sampler bugs of the baseline mechanisms."""


def battery_checks(samples: int = 2000, seed: int = 0) -> dict[str, list[Check]]:
    """The mechanism audits that must catch the bugs."""
    return {"laplace_dx": [mechanism_audit("laplace_dx", {"eta": 5.0}, samples=samples, seed=seed)],
            "santext": [mechanism_audit("santext", {"epsilon": 2.0}, samples=samples, seed=seed)],
            "custext": [mechanism_audit("custext", {"epsilon": 2.0, "top_k": 5}, samples=samples,
                                        seed=seed)]}
