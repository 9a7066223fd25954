"""Verdict rules: FAIL on a bound above its claim, LAW_MISMATCH when the draws do not follow the
declared law, INCONCLUSIVE when the audit could not test."""

from __future__ import annotations

from dpkit.audit.report import AuditReport, Finding, Verdict


def decide(report: AuditReport, rel_tol: float, abs_tol: float, gof_level: float) -> None:
    """Set the verdict, reason and witness from the findings and checks (see docs/audit.md)."""
    alpha = 1 - report.confidence
    exact_findings: list[Finding] = report.checks.pop("exact_findings", [])
    trusted = report.checks.get("sampler_matches_declared_law", True)
    failures = [f for f in report.findings if f.violates(rel_tol, abs_tol)]
    if trusted:
        report.findings.extend(exact_findings)
        failures += [f for f in exact_findings if f.violates(rel_tol, abs_tol)]
    if failures:
        report.verdict = Verdict.FAIL
        report.witness = max(failures, key=lambda f: f.measured - f.claimed)
        report.reason = f"the guarantee is refuted: {report.witness.event}"
        if not trusted:
            report.reason += "; the draws do not follow the declared output law either"
        return
    if "anonymity_violation" in report.checks:
        report.verdict = Verdict.FAIL
        report.reason = report.checks["anonymity_violation"]
        return
    if not trusted:
        report.verdict = Verdict.LAW_MISMATCH
        worst = min(report.checks.get("law_tests", {}).items(), key=lambda kv: kv[1],
                    default=None)
        shown = f"; worst statistic: {worst[0]} (p = {worst[1]:.2g})" if worst else ""
        report.reason = (f"the draws do not follow the declared output law (p = "
                         f"{report.checks['sampler_matches_declared_law_p']:.2g} < "
                         f"{alpha * gof_level:g}{shown}): the sampler or the declaration is "
                         "wrong, so the declared guarantee describes another mechanism; "
                         "sampling found no violation, exact values were not used")
        return
    reach = report.checks["certifiable_epsilon"]
    if not exact_findings and all(f.claimed >= reach for f in report.findings):
        report.verdict = Verdict.INCONCLUSIVE
        report.reason = (f"with {report.samples} draws per input no event can show ε above "
                         f"{reach:.3g}, below every tested claim; raise --samples")
        return
    report.verdict = Verdict.PASS
    report.reason = ("no evidence against the claim (a PASS is not a proof)"
                     + ("; exact values used" if exact_findings else ""))
