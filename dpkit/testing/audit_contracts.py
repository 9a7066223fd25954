"""Contract suite for defenses that offer a canary audit (see docs/audit.md, "Auditing defenses").

Example::

    from dpkit.testing import DefenseAuditContract

    class TestMyDefenseAudit(DefenseAuditContract):
        defense = "my_defense"              # registered name (or the class itself)
        params = {"target_epsilon": 2.0}    # small settings: one audit should take seconds
"""

from __future__ import annotations

from typing import Any, ClassVar


class DefenseAuditContract:
    """Checks a canary-auditable defense must pass: it offers the capability, its audit returns
    one score per canary and a claim, and the audit does not FAIL."""

    defense: ClassVar[Any] = ""
    params: ClassVar[dict] = {}
    audit_canaries: ClassVar[int] = 500
    audit_confidence: ClassVar[float] = 0.95
    seed: ClassVar[int] = 0

    def test_offers_canary_audit(self):
        """The defense has ``audit_run`` or a registered adapter."""
        from dpkit.audit.canary import AuditableDefense, auditable
        from dpkit.testing.params_contract import build_defense, process_registry

        built = build_defense(self.defense, self.params)
        assert isinstance(auditable(built, process_registry()), AuditableDefense)

    def test_canary_audit_does_not_fail(self):
        """The canary audit finds no evidence against the ledger's ε, and the releases follow the
        declared noise law where the audit tests it (neither FAIL nor LAW_MISMATCH)."""
        from dpkit.audit import Verdict, audit_defense
        from dpkit.testing.params_contract import process_registry

        report = audit_defense(self.defense, self.params, canaries=self.audit_canaries,
                               confidence=self.audit_confidence, seed=self.seed,
                               registry=process_registry())
        assert report.verdict not in (Verdict.FAIL, Verdict.LAW_MISMATCH), report.one_line()
        assert report.findings and report.findings[0].counts["canaries"] == self.audit_canaries
