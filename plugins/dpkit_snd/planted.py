"""SnD's planted-bug battery: bugs in the dχ sampler its client runs, caught by its canary audit
(``dpkit.testing.battery``). Shared by every defense that perturbs tokens with ``laplace_dx``."""

from __future__ import annotations

import copy

from dpkit.testing.battery import Check, defense_audit, test_check
from dpkit.testing.planted import PlantedBug, replace, scale_result

SAMPLER = "dpkit_baselines.laplace"


def eta_times(factor: float):
    """Patch maker: LaplaceDx.privatize draws at factor·η while its guarantee still declares η."""
    def make(original):
        def privatize(self, x, **kwargs):
            twin = copy.copy(self)
            twin.params = self.params.model_copy(update={"eta": self.params.eta * factor})
            return original(twin, x, **kwargs)
        return privatize
    return make


def sampler_bugs(target: str) -> list[PlantedBug]:
    """The dχ-sampler bugs, planted for ``target``."""
    return [
        PlantedBug("token noise ×¼", "noise scaled", target,
                   (scale_result(SAMPLER, "sample_laplace_noise", 0.25),)),
        PlantedBug("upload sent before its noise (noise ×0)", "threshold before noise", target,
                   (scale_result(SAMPLER, "sample_laplace_noise", 0.0),)),
        PlantedBug("sampler draws at 4η, declares η", "sampler scale", target,
                   (replace(f"{SAMPLER}:LaplaceDx", "privatize", eta_times(4.0)),)),
    ]


def _unclipped(original):
    return lambda y, bound: y


def _mean_norm(original):
    return lambda table: float(table.norm(dim=-1).mean())


PLANTED_BUGS = sampler_bugs("snd") + [
    PlantedBug("uploads not clipped (Eq. 3 skipped)", "clipping removed", "snd (clipping)",
               (replace(SAMPLER, "clip_norms", _unclipped),)),
    PlantedBug("clip bound from the mean row norm, not the largest", "clipping removed",
               "snd (clipping)", (replace("dpkit_snd.privatize", "measured_clip_bound", _mean_norm),)),
    PlantedBug("token noise ×½", "noise scaled", "snd (clipping)",
               (scale_result(SAMPLER, "sample_laplace_noise", 0.5),)),
]


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch SnD's planted bugs."""
    return {"snd": [defense_audit("snd", {"eta": 10.0}, canaries=canaries, seed=seed)],
            "snd (clipping)": [test_check("tests/plugins/snd/test_privatize_laws.py")]}
