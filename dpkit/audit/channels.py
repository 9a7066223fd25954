"""Per-channel canary audits: each noisy release of a record audited on its own.

A defense that releases several noisy things per record (a threshold bit, votes or soft targets,
a hidden mean) declares each as a channel: canaries placed at *that channel's* worst-case
neighbour, a score per canary from that channel's own likelihood ratio, the ε the ledger allows
that channel alone (its share of the record's claim: post-processing of the whole release, so
never above it) and, where the declared noise fixes the law of what is released, the p-value of a
test that the release follows it. Every canary must have its own, independent release (one query
per canary), so included and excluded scores are independent draws of the two neighbours' laws
and the Clopper–Pearson bound of the repeated-runs audit applies to each channel.

Multiple testing: k channels are tested at confidence 1 − (1 − c)/k each (Bonferroni), their law
tests at level (1 − c)·LAW_SHARE/k each, so a correct defense FAILs or LAW_MISMATCHes with
probability at most (1 − c)(1 + LAW_SHARE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.audit.one_run import clopper_pearson_epsilon, repeated_runs_epsilon
from dpkit.audit.report import AuditReport, Finding, Verdict

LAW_SHARE = 0.02
"""Share of the error budget spent on law tests (as in the mechanism audit: rejecting a law only
withholds a PASS, so it is kept rare for correct defenses)."""


@dataclass
class ChannelRun:
    """One channel of an audited run: a score per canary, its claim and its law test.

    ``scores`` are one per canary (same order and inclusion mask as the run's); ``law_p`` the
    p-value that the released values follow the law the declared noise implies (None: no test);
    ``law`` says what was tested.
    """

    name: str
    scores: np.ndarray
    claimed_epsilon: float
    law_p: float | None = None
    law: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChannelResult:
    """A channel's pooled result: lower bound, claim, reach, law p-value, guesses."""

    name: str
    measured: float
    claimed: float
    reach: float
    law_p: float | None
    law: str
    guesses: int
    correct: int
    canaries: int

    def to_dict(self) -> dict[str, Any]:
        """Plain values for the report's checks."""
        return dict(self.__dict__)


def pool(runs: list[list[ChannelRun]], masks: list[np.ndarray], confidence: float,
         delta: float) -> tuple[list[ChannelResult], float, float]:
    """Pool each channel over runs; bound each at the Bonferroni-corrected confidence.

    Returns the results, the per-channel confidence and the per-channel law level.
    """
    names = [c.name for c in runs[0]]
    k = len(names)
    level = 1.0 - (1.0 - confidence) / k
    law_level = (1.0 - confidence) * LAW_SHARE / k
    mask = np.concatenate(masks)
    out = []
    for i, name in enumerate(names):
        parts = [r[i] for r in runs]
        if any(p.name != name for p in parts):
            raise ValueError(f"runs disagree on channel {i}: {[p.name for p in parts]}")
        s = np.concatenate([np.asarray(p.scores, float) for p in parts])
        best = repeated_runs_epsilon(s[mask], s[~mask], level, delta)
        pos, neg = int(mask.sum()), int((~mask).sum())
        reach = clopper_pearson_epsilon(pos, pos, 0, neg, 1 - (1 - level) / (s.size + 1), delta)
        ps = [p.law_p for p in parts if p.law_p is not None]
        law_p = min(1.0, min(ps) * len(ps)) if ps else None  # Bonferroni over runs
        out.append(ChannelResult(name, best.epsilon, max(p.claimed_epsilon for p in parts),
                                 reach, law_p, parts[0].law, best.guesses, best.correct, s.size))
    return out, level, law_level


def gaussian_llr_p_value(llr: np.ndarray, included: np.ndarray, shift: float) -> float:
    """p-value that the log-likelihood ratios of a Gaussian channel follow the declared law.

    Under the declared noise the ratio of a canary whose mean moves by ``shift`` noise standard
    deviations (‖μ_in − μ_out‖/σ) is N(+shift²/2, shift²) when included and N(−shift²/2, shift²)
    when not; the standardized values must be N(0, 1): a two-sided chi-square test of their
    variance and a z-test of their mean signed by inclusion (Bonferroni over both). Less (or more)
    noise than declared changes the variance by the square of the factor; a larger shift than
    declared (clipping skipped) moves the signed mean.
    """
    from scipy import stats

    if not shift > 0:
        return 1.0
    sign = np.where(included, 1.0, -1.0)
    z = (np.asarray(llr, float) - sign * shift ** 2 / 2) / shift
    n = z.size
    chi = float((z ** 2).sum())
    p_var = 2 * min(stats.chi2.cdf(chi, n), stats.chi2.sf(chi, n))
    p_mean = 2 * stats.norm.sf(abs((sign * z).mean()) * math.sqrt(n))
    return float(min(1.0, 2 * min(p_var, p_mean)))


def binomial_p_value(hits: int, n: int, p: float) -> float:
    """Two-sided exact binomial p-value of ``hits`` in ``n`` draws with success probability p."""
    from scipy import stats

    if n == 0:
        return 1.0
    return float(stats.binomtest(hits, n, min(max(p, 0.0), 1.0)).pvalue)


def counts_p_value(observed: np.ndarray, simulated: np.ndarray) -> float:
    """Chi-square test that two category count vectors come from the same law (a two-sample
    test: ``simulated`` are draws from the declared law, so its own noise is accounted for)."""
    from scipy import stats

    table = np.stack([observed, simulated]).astype(float)
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table, correction=False).pvalue)


def add_channels(report: AuditReport, channels: list, included: list, confidence: float,
                 delta: float) -> None:
    """Per-channel findings (Bonferroni over channels) ahead of the whole-record one."""
    results, level, law_level = pool(channels, included, confidence, delta)
    found = [Finding(f"channel {r.name}", f"{r.canaries} canaries (own queries)", 1.0, r.claimed,
                     r.measured, r.measured,
                     f"channel {r.name}: guessed 'included' for {r.guesses} canaries, "
                     f"{r.correct} right", delta,
                     {"canaries": r.canaries, "guesses": r.guesses, "correct": r.correct})
             for r in results]
    report.findings[:0] = found
    report.checks["channels"] = [r.to_dict() for r in results]
    report.checks["channel_confidence"] = level
    report.checks["channel_law_level"] = law_level


def law_check(report: AuditReport, laws: list, confidence: float) -> None:
    """LAW_MISMATCH when a run's law test rejects (Bonferroni over tests) and nothing FAILed."""
    level = (1.0 - confidence) * LAW_SHARE / len(laws)
    report.checks["law_tests"] = {f"{n} ({what})": p for n, p, what in laws}
    name, p, what = min(laws, key=lambda t: t[1])
    if p < level and report.verdict is not Verdict.FAIL:
        report.verdict = Verdict.LAW_MISMATCH
        report.reason = (f"{name}: the released values do not follow the law the declared noise "
                         f"implies ({what}: p={p:.3g} < {level:.3g})")


def decide_channels(report: AuditReport, rel_tol: float, abs_tol: float) -> bool:
    """Verdict from the channels: FAIL on a bound, LAW_MISMATCH on a law test, else PASS."""
    rows, level = report.checks["channels"], report.checks["channel_law_level"]
    for finding in report.findings[:len(rows)]:
        if finding.violates(rel_tol, abs_tol):
            report.verdict, report.witness = Verdict.FAIL, finding
            report.reason = (f"{finding.strategy}: the ledger's ε={_fmt_eps(finding.claimed)} for this "
                             f"channel is refuted, ε ≥ {finding.measured:.3f}")
            return True
    bad = [r for r in rows if r["law_p"] is not None and r["law_p"] < level]
    if bad:
        worst = min(bad, key=lambda r: r["law_p"])
        report.verdict = Verdict.LAW_MISMATCH
        report.reason = (f"channel {worst['name']}: the released values do not follow the law the "
                         f"declared noise implies ({worst['law']}: p={worst['law_p']:.3g} < "
                         f"{level:.3g}); the noise run is not the noise the ledger charges")
        return True
    if all(r["claimed"] >= r["reach"] for r in rows):
        return False  # laws agree, but no channel's claim is within reach: the record decides
    report.verdict = Verdict.PASS
    report.reason = ("no evidence against any channel's claim, and each channel's release follows "
                     "its declared law where tested (a PASS is not a proof)")
    return True


def _fmt_eps(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.4g}"
