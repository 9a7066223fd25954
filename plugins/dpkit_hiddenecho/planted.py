"""HiddenEcho's planted-bug battery: the dχ-sampler bugs of its client (the registered
``laplace_dx``, found through the registry), caught by its canary audit and its noise-law tests
(``dpkit.testing``)."""

from __future__ import annotations

from dpkit.testing import Check, defense_audit, dx_noise_reuse_bugs, dx_sampler_bugs, test_check

PLANTED_BUGS = (dx_sampler_bugs("hiddenecho", "laplace_dx")
                + dx_noise_reuse_bugs("hiddenecho (client noise)", "laplace_dx"))


def battery_checks(canaries: int = 1000, seed: int = 0) -> dict[str, list[Check]]:
    """The audit that must catch HiddenEcho's planted bugs."""
    return {"hiddenecho": [defense_audit("hiddenecho", {"eta": 10.0}, canaries=canaries,
                                         seed=seed)],
            "hiddenecho (client noise)": [test_check("tests/plugins/hiddenecho/test_noise_laws.py")]}
