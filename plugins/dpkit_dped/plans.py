"""The noise plan of a DPED-family defense from its params: public numbers both sides compute."""

from __future__ import annotations

from dpkit_dped.privacy import (
    NoisePlan,
    hidden_sensitivity,
    noiseless_plan,
    paper_plan,
    plan_noise,
)


def calibrate(p, uses_hidden: bool, delta: float, accountant: str) -> NoisePlan:
    """σ of each release of params ``p``, calibrated to the target ε for ``num_queries`` queries
    at ``delta`` with ``accountant`` (all 0 when ``noiseless``); ``uses_hidden``: DPED's hidden
    means are released (PATE: outputs only)."""
    shares = {"threshold": p.share_threshold, "votes": p.share_votes}
    sens = 0.0
    if uses_hidden:
        shares["hidden"], sens = p.share_hidden, hidden_sensitivity(p.clip, p.teachers)
    if p.noiseless:
        return noiseless_plan(p.num_queries, hidden=uses_hidden, hidden_sens=sens, target=p.target)
    if p.accounting == "paper":
        return paper_plan(epsilon_per_query=p.target_epsilon, delta=delta, accountant=accountant,
                          queries=p.num_queries, hidden_sens=sens, teachers=p.teachers,
                          clip=getattr(p, "clip", 1.0), target=p.target)
    return plan_noise(target_epsilon=p.target_epsilon, delta=delta, accountant=accountant,
                      queries=p.num_queries, shares=shares, noisy_threshold=p.threshold == "noisy",
                      hidden_sens=sens, target=p.target)
