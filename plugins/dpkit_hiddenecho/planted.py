"""HiddenEcho's planted-bug battery: the dχ-sampler bugs of its client, caught by its canary audit
(``dpkit.testing.battery``)."""

from __future__ import annotations

from dpkit_snd.planted import sampler_bugs

from dpkit.testing import Check, defense_audit

PLANTED_BUGS = sampler_bugs("hiddenecho")


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch HiddenEcho's planted bugs."""
    return {"hiddenecho": [defense_audit("hiddenecho", {"eta": 10.0}, canaries=canaries,
                                         seed=seed)]}
