"""SnD's planted-bug battery: bugs in the dχ sampler its client runs (the registered
``laplace_dx``, found through the registry) and in its clipping, caught by its canary audit and
its law tests (``dpkit.testing``)."""

from __future__ import annotations

from dpkit.testing import (
    Check,
    PlantedBug,
    defense_audit,
    dx_mechanism_module,
    dx_sampler_bugs,
    replace,
    scale_result,
    test_check,
)


def _unclipped(original):
    return lambda y, bound: y


def _mean_norm(original):
    return lambda table: float(table.norm(dim=-1).mean())


def planted_bugs() -> list[PlantedBug]:
    """The sampler bugs and the clipping bugs (the sampler's module read from the registry)."""
    sampler = dx_mechanism_module("laplace_dx")
    return dx_sampler_bugs("snd", "laplace_dx") + [
        PlantedBug("uploads not clipped (Eq. 3 skipped)", "clipping removed", "snd (clipping)",
                   (replace(sampler, "clip_norms", _unclipped),)),
        PlantedBug("clip bound from the mean row norm, not the largest", "clipping removed",
                   "snd (clipping)",
                   (replace("dpkit_snd.privatize", "measured_clip_bound", _mean_norm),)),
        PlantedBug("token noise ×½", "noise scaled", "snd (clipping)",
                   (scale_result(sampler, "sample_laplace_noise", 0.5),)),
    ]


PLANTED_BUGS = planted_bugs()


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch SnD's planted bugs."""
    return {"snd": [defense_audit("snd", {"eta": 10.0}, canaries=canaries, seed=seed)],
            "snd (clipping)": [test_check("tests/plugins/snd/test_privatize_laws.py")]}
