"""Empirical privacy audit: lower bounds on a mechanism's (or a whole defense's) privacy loss
against its claim."""

from dpkit.audit.auditor import audit, build_mechanism
from dpkit.audit.canary import AuditableDefense, CanaryRun, register_defense_audit
from dpkit.audit.claims import Claim, dp_epsilon
from dpkit.audit.defense import audit_defense
from dpkit.audit.inputs import AuditPair, make_test_space, select_pairs
from dpkit.audit.report import AuditReport, Finding, Verdict
from dpkit.audit.stats import (
    certifiable_epsilon,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_at_delta,
    epsilon_lower_bound,
)

__all__ = [
    "AuditPair",
    "AuditReport",
    "AuditableDefense",
    "CanaryRun",
    "Claim",
    "Finding",
    "Verdict",
    "audit",
    "audit_defense",
    "build_mechanism",
    "certifiable_epsilon",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "dp_epsilon",
    "epsilon_at_delta",
    "epsilon_lower_bound",
    "make_test_space",
    "register_defense_audit",
    "select_pairs",
]
