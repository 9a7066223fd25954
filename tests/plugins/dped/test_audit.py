"""The canary audit scores the channel the defense releases: the soft sum of teacher outputs by
default, the noisy argmax label under ``target: hard``."""

from __future__ import annotations

import dataclasses

import pytest
from dpkit_dped.aggregation import aggregate
from dpkit_dped.audit import AggregationCanaryAudit
from dpkit_dped.defenses import DpedPate

from dpkit.audit import Verdict, audit_defense
from dpkit.audit.canary import register_defense_audit
from dpkit.contract.plugins import get_registry


class QuietVotesPate(DpedPate):
    """Accounts the planned noise on the teachers' summed outputs but draws a tenth of it."""

    name = "test_broken_pate_quiet_outputs"

    @staticmethod
    def aggregate_function(vectors, summed, plan, **kwargs):
        """aggregate() with the output noise cut to 0.1× the plan's."""
        return aggregate(vectors, summed, dataclasses.replace(plan, sigma_votes=plan.sigma_votes * 0.1),
                         **kwargs)


register_defense_audit(QuietVotesPate.name, AggregationCanaryAudit)


def test_the_audit_catches_quiet_noise_on_the_soft_release():
    """A tenth of the output noise: the outputs channel's law test (or its bound) catches it at
    the plan for the defense's own query count (docs/audit.md, "Per-channel audits")."""
    report = audit_defense(QuietVotesPate, {"target_epsilon": 20.0}, canaries=500, seed=0, registry=get_registry())
    assert report.verdict in (Verdict.FAIL, Verdict.LAW_MISMATCH)
    assert report.verdict is Verdict.FAIL or "channel outputs" in report.reason


@pytest.mark.parametrize("target", ["soft", "hard"])
def test_the_correct_defense_passes_for_either_target(target):
    report = audit_defense("dped_pate", {"target_epsilon": 20.0, "target": target}, canaries=500,
                           seed=0, registry=get_registry())
    assert report.verdict not in (Verdict.FAIL, Verdict.LAW_MISMATCH)
