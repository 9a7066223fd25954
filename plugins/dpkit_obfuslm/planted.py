"""Planted-bug battery of ObfusLM's noise (WeightSynth) and clustering (EmbedCluster), caught by
the plug-in's white-box law and clustering tests (``dpkit.testing.battery``)."""

from __future__ import annotations

from dpkit.testing import (
    Check,
    PlantedBug,
    replace,
    reused_across_calls,
    scale_result,
    test_check,
)

SYNTH, CLUSTER = "dpkit_obfuslm.synth", "dpkit_obfuslm.cluster"


def _one_more_member(original):
    return lambda vals, idx, gamma, k: original(vals, idx, gamma, k + 1)


def _largest_set(original):
    return property(lambda self: int(self.sizes.max()))


PLANTED_BUGS = [
    PlantedBug("WeightSynth noise ×½", "noise scaled", "obfuslm (noise)",
               (scale_result(SYNTH, "laplace", 0.5),)),
    PlantedBug("sensitivity Δ_S halved (scale Δ_S/2ε, ε declared)", "sampler scale",
               "obfuslm (noise)", (scale_result(SYNTH, "shift_invariant_sensitivity", 0.5),)),
    PlantedBug("noise drawn once, reused across calls", "noise reused", "obfuslm (noise)",
               (reused_across_calls(SYNTH, "laplace"),)),
    PlantedBug("clusters take k + 1 members", "partition broken", "obfuslm (clustering)",
               (replace(CLUSTER, "greedy_assign", _one_more_member),)),
    PlantedBug("k achieved reported as the largest set", "partition broken",
               "obfuslm (clustering)", (replace(f"{CLUSTER}:Clusters", "k_achieved", _largest_set),)),
]
"""Noise and clustering bugs of ObfusLM."""


def battery_checks() -> dict[str, list[Check]]:
    """The plug-in's law and clustering tests."""
    laws = "tests/plugins/obfuslm/test_noise_laws.py"
    return {"obfuslm (noise)": [test_check(laws, "tests/plugins/obfuslm/test_synth.py")],
            "obfuslm (clustering)": [test_check(laws, "tests/plugins/obfuslm/test_cluster.py")]}
