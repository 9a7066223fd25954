"""HiddenEcho's planted-bug battery: the dχ-sampler bugs of its client, caught by its canary audit
(``dpkit.testing.battery``)."""

from __future__ import annotations

from dpkit_snd.planted import sampler_bugs

from dpkit.testing.battery import Check, defense_audit, test_check
from dpkit.testing.noise_bugs import reseeded_each_draw, reused_across_calls
from dpkit.testing.planted import PlantedBug

SAMPLER = "dpkit_baselines.laplace"

PLANTED_BUGS = sampler_bugs("hiddenecho") + [
    PlantedBug("client noise reused across calls", "noise reused", "hiddenecho (client noise)",
               (reused_across_calls(SAMPLER, "sample_laplace_noise"),)),
    PlantedBug("client generator re-seeded to 0 before each draw", "noise reused",
               "hiddenecho (client noise)", (reseeded_each_draw(SAMPLER, "sample_laplace_noise"),)),
]


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch HiddenEcho's planted bugs."""
    return {"hiddenecho": [defense_audit("hiddenecho", {"eta": 10.0}, canaries=canaries,
                                         seed=seed)],
            "hiddenecho (client noise)": [test_check("tests/plugins/hiddenecho/test_noise_laws.py")]}
