"""Audit a whole defense with canaries: one-run ε lower bound against the ledger's ε."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpkit.audit.canary import CanaryRun, auditable
from dpkit.audit.channels import add_channels, decide_channels, law_check
from dpkit.audit.one_run import (
    clopper_pearson_epsilon,
    epsilon_from_scores,
    one_run_reach,
    repeated_runs_epsilon,
)
from dpkit.audit.report import AuditReport, Finding, Verdict
from dpkit.contract.context import derive_seed, resolve_device
from dpkit.base.errors import AuditError

Progress = Callable[[int, int, str], None]


def build_defense(defense: Any, params: dict | None = None, registry: Any = None) -> Any:
    """A defense instance from a registered name, a class or an instance (params validated)."""
    from dpkit.contract.registry import validate_params

    if isinstance(defense, str):
        if registry is None:
            from dpkit.contract.plugins import get_registry
            registry = get_registry()
        cls = registry.get("defense", defense).cls
    elif isinstance(defense, type):
        cls = defense
    else:
        if params:
            raise AuditError("params were given together with a defense instance; pass the "
                             "registered name or the class instead")
        return defense
    return cls(validate_params(cls, params or {}))


def audit_context(seed: int, delta: float, device: str = "cpu", accountant: str = "rdp",
                  say: Callable[[str], None] | None = None) -> Any:
    """A fresh RunContext (no dataset or model; the audit builds its own) with an empty ledger.

    Its wire reaches the defense's server in this process: the canary auditor scores what was
    sent up (recorded at the wire), not what the server kept, so the server needs no isolation
    here, and a test-only defense works.
    """
    from dpkit.accounting import Ledger
    from dpkit.boundary.session import connector
    from dpkit.contract.context import RunContext
    from dpkit.contract.plugins import get_registry

    return RunContext(dataset=None, model=None, device=resolve_device(device), seed=seed,
                      ledger=Ledger(delta=delta, accountant=accountant), registry=get_registry(),
                      progress=say, connect=connector("inprocess"))


def audit_defense(defense: Any, params: dict | None = None, *, canaries: int = 1000,
                  runs: int = 1, method: str = "one-run", confidence: float = 0.95,
                  seed: int = 0, delta: float = 1e-5, device: str = "cpu",
                  progress: Progress | None = None, rel_tol: float = 0.01,
                  abs_tol: float = 0.01) -> AuditReport:
    """Canary audit of ``defense`` (name, class or instance): PASS / FAIL / INCONCLUSIVE.

    ``"one-run"``: each of ``runs`` independent runs inserts each of its ``canaries`` with
    probability ½; the guesses over all runs' canaries give a one-run ε lower bound (Steinke,
    Nasr and Jagielski, NeurIPS 2023). ``"repeated"``: ``runs`` runs of one canary each, in or out
    by a coin, and a Clopper–Pearson bound (Jagielski et al. 2020). Either is compared at
    ``confidence`` with the ε the run's ledger claims for one canary.
    """
    if not 0.5 <= confidence < 1:
        raise AuditError(f"confidence must lie in [0.5, 1), got {confidence!r}; e.g. 0.95")
    if method not in ("one-run", "repeated"):
        raise AuditError(f"method must be 'one-run' or 'repeated', got {method!r}")
    if method == "repeated":
        canaries = 1
        if runs < 20:
            raise AuditError(f"the repeated-runs audit needs ≥ 20 runs (one canary each), got "
                             f"runs={runs}; e.g. --runs 1000")
    elif canaries < 20 or runs < 1:
        raise AuditError(f"need ≥ 20 canaries and ≥ 1 run, got canaries={canaries}, runs={runs}")
    start = time.perf_counter()
    built = build_defense(defense, params)
    capability = auditable(built)
    name = getattr(built, "name", type(built).__name__)
    scores, included, claims, details, channels, laws = [], [], [], [], [], []
    for run in range(runs):
        label = f"run {run + 1}/{runs}"
        if progress:
            progress(run, runs, label)
        say = (lambda msg, _r=run, _l=label: progress(_r, runs, f"{_l}: {msg}")) if progress else None
        run_seed = derive_seed(seed, "defense-audit", str(run))
        mask = np.random.default_rng(derive_seed(run_seed, "canary-mask")).random(canaries) < 0.5
        ctx = audit_context(run_seed, delta, device, say=say)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(run_seed)
            result: CanaryRun = capability.audit_run(ctx, mask.copy())
        result.check(mask)
        scores.append(np.asarray(result.scores, float))
        included.append(mask)
        claims.append(result.claimed_epsilon)
        channels.append(result.channels)
        laws += [(name, p, what) for name, (p, what) in result.law.items()]
        details.append({**result.details, "seconds": time.perf_counter() - start})
    if progress:
        progress(runs, runs, "bound")
    report = _report(name, built, scores, included, claims, result, confidence, delta,
                     details if method == "one-run" else details[-1:], method)
    if channels[0]:
        add_channels(report, channels, included, confidence, delta)
    _decide(report, rel_tol, abs_tol)
    if laws:
        law_check(report, laws, confidence)
    report.seconds = time.perf_counter() - start
    return report


def _report(name: str, built: Any, scores: list, included: list, claims: list,
            last: CanaryRun, confidence: float, delta: float, details: list,
            method: str) -> AuditReport:
    s, mask = np.concatenate(scores), np.concatenate(included)
    claimed = max(claims)
    m = s.size
    params = built.params.model_dump(mode="json") if hasattr(built, "params") else {}
    report = AuditReport(name, params, f"(ε={_fmt(claimed)}, δ={delta:g}) per {last.unit}",
                         Verdict.PASS, "", confidence, m, [f"{method} canaries"])
    if not mask.any() or mask.all():
        report.verdict = Verdict.INCONCLUSIVE
        report.reason = "every canary fell on the same side; raise the number of canaries"
        return report
    if method == "one-run":
        best = epsilon_from_scores(s[mask], s[~mask], confidence, delta)
        reach = one_run_reach(m, confidence, delta)
    else:
        best = repeated_runs_epsilon(s[mask], s[~mask], confidence, delta)
        pos, neg = int(mask.sum()), int((~mask).sum())
        reach = clopper_pearson_epsilon(pos, pos, 0, neg, 1 - (1 - confidence) / (m + 1), delta)
    estimate = math.log(best.correct / max(best.guesses - best.correct, 0.5)) if best.guesses else 0.0
    report.findings.append(Finding(
        f"{method} canaries", f"{m} canaries ({int(mask.sum())} included)", 1.0, claimed,
        best.epsilon, estimate,
        f"guessed 'included' for the {best.guesses} highest scores (≥ {best.threshold:.4g}): "
        f"{best.correct} right, {best.guesses - best.correct} wrong", delta,
        {"canaries": m, "included": int(mask.sum()), "guesses": best.guesses,
         "correct": best.correct, "wrong": best.guesses - best.correct}))
    report.checks["certifiable_epsilon"] = reach
    report.checks["runs"] = details
    if math.isinf(claimed):
        report.reason = "the ledger claims no guarantee (ε = ∞): there is nothing to refute"
    return report


def _decide(report: AuditReport, rel_tol: float, abs_tol: float) -> None:
    """The mechanism audit's rules: FAIL on a bound above the claim, INCONCLUSIVE out of reach."""
    if report.reason or not report.findings:
        return
    if "channels" in report.checks and decide_channels(report, rel_tol, abs_tol):
        return
    head = report.findings[len(report.checks.get("channels", []))]
    if head.violates(rel_tol, abs_tol):
        report.verdict, report.witness = Verdict.FAIL, head
        report.reason = (f"the ledger's ε={_fmt(head.claimed)} is refuted: {head.event} "
                         f"shows ε ≥ {head.measured:.3f}")
        return
    reach = report.checks["certifiable_epsilon"]
    if head.claimed >= reach:
        report.verdict = Verdict.INCONCLUSIVE
        report.reason = (f"with {report.samples} canaries even all-correct guesses show at most "
                         f"ε ≥ {reach:.3g}, not above the claimed {_fmt(head.claimed)}; raise "
                         "--canaries or --runs (no canary audit refutes a large ε at small δ)")
        return
    report.verdict = Verdict.PASS
    report.reason = "no evidence against the claim (a PASS is not a proof)"


def _fmt(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.4g}"


def describe(report: AuditReport) -> str:
    """A few lines for people: bound, confidence, ledger ε, canaries, guesses, verdict, witness."""
    rows = report.checks.get("channels", [])
    head = report.findings[len(rows)] if len(report.findings) > len(rows) else None
    lines = [f"{report.verdict.value}: defense {report.mechanism} — {report.reason}"]
    if rows:
        lines.append(f"  per channel (confidence {report.checks['channel_confidence']:.4g} each, "
                     f"law level {report.checks['channel_law_level']:.3g}; Bonferroni over "
                     f"{len(rows)} channels):")
        lines += [f"    {r['name']:<10} ε ≥ {r['measured']:.3f}  claim {_fmt(r['claimed'])}  "
                  f"reach {r['reach']:.3f}  law p {'—' if r['law_p'] is None else format(r['law_p'], '.3g')}"
                  f"  ({r['canaries']} canaries)" for r in rows]
    if head is not None:
        c = head.counts
        lines += [(f"  empirical ε lower bound  {head.measured:.3f}  (confidence "
                   f"{report.confidence:g}, δ={head.delta:g}; plug-in estimate {head.estimate:.3f})"),
                  f"  ledger ε per canary      {_fmt(head.claimed)}",
                  f"  canaries                 {c['canaries']} ({c['included']} included)",
                  (f"  guesses                  {c['guesses']}: {c['correct']} right, "
                   f"{c['wrong']} wrong, {c['canaries'] - c['guesses']} abstained"),
                  f"  reach (all guesses right) {report.checks['certifiable_epsilon']:.3f}",
                  f"  time                     {report.seconds:.1f} s"]
    if report.witness is not None:
        lines.append(f"  witness: {report.witness.event}")
    return "\n".join(lines)
