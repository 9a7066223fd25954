"""SnD's planted-bug battery: bugs in the dχ sampler its client runs (the registered ``laplace_dx``,
found through the registry), caught by its canary audit (``dpkit.testing``)."""

from __future__ import annotations

from dpkit.testing import Check, defense_audit, dx_sampler_bugs

PLANTED_BUGS = dx_sampler_bugs("snd", "laplace_dx")


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch SnD's planted bugs."""
    return {"snd": [defense_audit("snd", {"eta": 10.0}, canaries=canaries, seed=seed)]}
