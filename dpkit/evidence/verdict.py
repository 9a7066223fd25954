"""Verdicts of a spec's claims on finished rows: holds, refuted or undecided, with the numbers.

Per compared point: the paired differences over seeds, their Student-t 95 % interval, and two
one-sided t tests — for the claim (H0: "A is not better by the margin") and against it (H0: "A is
better by the margin") — each Holm-corrected across the claim's points. ``holds``: every
point's corrected test for the claim rejects at 2.5 % (one-sided; the 95 % interval's tail).
``refuted``: some point's corrected test against the claim rejects. Otherwise ``undecided``;
always ``undecided`` where a point has fewer than two paired seeds. docs/evidence.md states this in full.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dpkit.base.results import CellResult
from dpkit.evidence import power
from dpkit.evidence.claims import Claim
from dpkit.evidence.pairing import ClaimError, equal_pairs, matched_pairs
from dpkit.evidence.stats import ALPHA, LEVEL, Summary, holm, one_sided_p, summarize

MARKS = {"holds": "✓", "refuted": "✗", "undecided": "?"}


@dataclass
class PointResult:
    """The evidence at one compared point."""

    at: object
    seeds: list[int]
    a_mean: float
    b_mean: float
    diff: dict
    p: float = math.nan
    p_holm: float = math.nan
    p_against: float = math.nan
    p_against_holm: float = math.nan
    detectable: float = math.nan  # the difference this run detects at power.POWER
    paper_effect: float = math.nan
    seeds_for_paper: int | None = None


@dataclass
class ClaimResult:
    """A claim's verdict, why, and the per-point numbers behind it."""

    claim: str
    verdict: str
    reason: str
    spec: dict
    points: list[PointResult] = field(default_factory=list)
    power_note: str = ""  # "with N seeds the run had 80 % power to show this if, in truth, …"
    robustness: dict[str, str] = field(default_factory=dict)  # other metric -> its verdict

    @property
    def headline(self) -> str:
        """``verdict — power note``, e.g. ``undecided — with 3 seeds the run had 80 % power …``."""
        return f"{self.verdict} — {self.power_note}" if self.power_note else self.verdict

    def to_dict(self) -> dict:
        """JSON-ready mapping (claims.json)."""
        return asdict(self)


def resolve(claim: Claim, report_x: str | None) -> Claim:
    """The claim with ``over`` defaulted to the spec's report x."""
    if claim.at == "equal" and not claim.over and report_x:
        return claim.model_copy(update={"over": report_x})
    return claim


def evaluate(claim: Claim, rows: list[CellResult], report_x: str | None = None) -> ClaimResult:
    """Judge one claim on the finished rows (paired by seed), and again on each of its
    ``robustness`` metrics (their verdicts on ``result.robustness``)."""
    result = _evaluate(claim, rows, report_x)
    for metric in claim.robustness:
        other = claim.model_copy(update={"metric": metric, "robustness": []})
        result.robustness[metric] = _evaluate(other, rows, report_x).verdict
    return result


def _evaluate(claim: Claim, rows: list[CellResult], report_x: str | None = None) -> ClaimResult:
    claim = resolve(claim, report_x)

    def result(verdict: str, reason: str, points: list[PointResult] | None = None) -> ClaimResult:
        points = points or []
        power.annotate(claim, points, ALPHA)
        label = (lambda v: f"{claim.privacy} = {_at(v)}") if claim.at == "matched" else \
            (lambda v: f"{claim.over} = {_at(v)}")
        return ClaimResult(claim=claim.title(), verdict=verdict, reason=reason,
                           spec=claim.model_dump(mode="json"), points=points,
                           power_note=power.note(claim, points, label) if points else "")

    layout: list[tuple[object, list[tuple[int, float, float]]]]
    try:
        if claim.at == "equal":
            layout = equal_pairs(claim, rows)
            note = f"equal {claim.over}" if claim.over else "one point"
        else:
            matched, note = matched_pairs(claim, rows)
            layout = list(matched)
    except ClaimError as exc:
        return result("undecided", f"cannot evaluate: {exc}")
    if not layout:
        return result("undecided", note)
    missing = _missing_metric(claim, rows, layout)
    if missing:
        return result("undecided", missing)
    points = [_point(claim, at, pairs) for at, pairs in layout]
    thin = [p for p in points if len(p.seeds) < 2]
    if thin:
        where = ", ".join(f"{_at(p.at)} ({len(p.seeds)} seed{'s' * (len(p.seeds) != 1)})"
                          for p in thin)
        return result("undecided", f"fewer than 2 paired seeds at {where}: a confidence interval "
                      "needs at least 2 (run with --seeds 3 or more)", points)
    for p, q in zip(points, holm([p.p for p in points])):
        p.p_holm = q
    for p, q in zip(points, holm([p.p_against for p in points])):
        p.p_against_holm = q
    against = [p for p in points if p.p_against_holm < ALPHA]
    if all(p.p_holm < ALPHA for p in points):
        verdict, why = "holds", f"at all {len(points)} point(s), Holm-corrected p < {ALPHA:g}"
    elif against:
        verdict, why = "refuted", ("the opposite is significant (Holm-corrected p < "
                                   f"{ALPHA:g}){_where(against)}")
    else:
        weak = [p for p in points if p.p_holm >= ALPHA]
        verdict, why = "undecided", (f"not significant{_where(weak)}"
                                     " either way")
    return result(verdict, f"{why} ({note}, {len(points[0].seeds)} seeds)", points)


def _missing_metric(claim: Claim, rows: list[CellResult], layout) -> str:
    names = {k for r in rows for k in (*r.metrics, *r.privacy)}
    for name in (claim.metric, claim.privacy):
        if name and name not in names:
            return (f"no cell reports metric {name!r}; metrics in these results: "
                    f"{', '.join(sorted(names))}")
    if all(not pairs for _, pairs in layout):
        return f"{claim.method!r} and {claim.versus!r} share no finished seed with {claim.metric}"
    return ""


def _point(claim: Claim, at, pairs: list[tuple[int, float, float]]) -> PointResult:
    diffs = [claim.difference(a, b) for _, a, b in pairs]
    summary = summarize(diffs) if diffs else Summary(math.nan, math.nan, math.nan, math.nan, 0)
    result = PointResult(at=at, seeds=[s for s, _, _ in pairs], diff=summary.to_dict(),
                         a_mean=_mean([a for _, a, _ in pairs]),
                         b_mean=_mean([b for _, _, b in pairs]))
    if len(diffs) >= 2:
        greater = claim.direction == "greater"
        result.p = one_sided_p(diffs, claim.threshold(), greater)
        result.p_against = one_sided_p(diffs, claim.threshold(), not greater)
    return result


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _where(points: list) -> str:
    """`` at 1, 8`` naming the points, or nothing for a claim's single unswept point."""
    shown = [_at(p.at) for p in points if p.at is not None]
    return f" at {', '.join(shown)}" if shown else ""


def _at(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def evaluate_all(spec, rows: list[CellResult]) -> list[ClaimResult]:
    """Every claim of ``spec`` judged on ``rows``; a claim on a method of the spec that has no
    finished cell yet says so (an interrupted run), rather than that no such method exists."""
    labels = {entry.display for _, entry in spec.methods()} if hasattr(spec, "methods") else set()
    finished = {r.method for r in rows}
    out = []
    for claim in getattr(spec, "claims", None) or []:
        waiting = [m for m in (claim.method, claim.versus) if m in labels and m not in finished]
        if waiting:
            names = " and ".join(repr(m) for m in waiting)
            out.append(ClaimResult(claim=claim.title(), verdict="undecided", spec=claim.model_dump(
                mode="json"), reason=f"no finished cells yet of {names}: rerun the same command "
                "to resume"))
        else:
            out.append(evaluate(claim, rows, spec.report.x))
    return out


def format_verdicts(results: list[ClaimResult]) -> str:
    """The verdict lines printed after the results table."""
    if not results:
        return ""
    lines = ["claims (paired seeds, 95 % Student-t intervals, Holm across points; detectable "
             f"effects at {power.POWER * 100:g} % power, one-sided t at {ALPHA:g}/points):"]
    for i, r in enumerate(results, 1):
        lines.append(f"  [{i}] {MARKS[r.verdict]} {r.verdict.upper()}: {r.claim}")
        lines.append(f"      {r.headline}")
        lines.append(f"      {r.reason}")
        if r.robustness:
            lines.append("      robustness: " + "; ".join(
                f"on {m} {v} ({'same' if v == r.verdict else 'moved'})"
                for m, v in r.robustness.items()))
        if r.points:
            lines.append(f"      {_roles(r.spec)}")
        for p in r.points:
            d = p.diff
            ci = (f"[{d['ci_low']:+.4g}, {d['ci_high']:+.4g}]" if math.isfinite(d["ci_low"])
                  else "[n/a]")
            ps = f", p={p.p_holm:.3g} (Holm)" if math.isfinite(p.p_holm) else ""
            where = "" if p.at is None else f"at {_at(p.at)}: "  # a claim without ``over``
            lines.append(f"      {where}A={p.a_mean:.4g} B={p.b_mean:.4g} "
                         f"diff={d['mean']:+.4g} {ci} {_bar(r.spec)}{ps}"
                         f"{_power_part(p, r.spec['direction'])}")
    robust = [(i, r) for i, r in enumerate(results, 1) if r.robustness]
    if robust:
        moved = [f"[{i}] {r.verdict} → {v} on {m}" for i, r in robust
                 for m, v in r.robustness.items() if v != r.verdict]
        same = sum(set(r.robustness.values()) == {r.verdict} for _, r in robust)
        metrics = sorted({m for _, r in robust for m in r.robustness})
        lines.append(f"robustness: {same} of {len(robust)} claims keep their verdict on "
                     f"{', '.join(metrics)}" + (f"; moved: {'; '.join(moved)}" if moved else ""))
    return "\n".join(lines)


def _roles(spec: dict) -> str:
    """Which method is A and which B, and the difference tested."""
    factor = 1 + spec["margin"] if spec["direction"] == "greater" else 1 - spec["margin"]
    diff = f"A − {factor:g}·B" if spec.get("relative") else "A − B"
    return (f"A = {spec['method']}, B = {spec['versus']}; diff = {diff} in {spec['metric']}, "
            "paired by seed")


def _bar(spec: dict) -> str:
    """What the difference must clear for the claim: ``(needs > −0.03)``."""
    op = ">" if spec["direction"] == "greater" else "<"
    threshold = 0.0 if spec.get("relative") else \
        (spec["margin"] if spec["direction"] == "greater" else -spec["margin"]) + 0.0
    kind = ", a non-inferiority margin" if (threshold < 0 if op == ">" else threshold > 0) else ""
    return f"(needs {op} {'0' if threshold == 0 else format(threshold, '+.4g')}{kind})"


def _power_part(p: PointResult, direction: str) -> str:
    if not math.isfinite(p.detectable):
        return ""
    text = f"; {power.detectable_text(p, direction)}"
    if math.isfinite(p.paper_effect):
        seeds = "> " + f"{power.MAX_SEEDS:,}" if p.seeds_for_paper is None else p.seeds_for_paper
        text += f"; the paper's {p.paper_effect:+.3g} needs ≈ {seeds} seeds"
    return text


def write_claims(results: list[ClaimResult], path: Path) -> None:
    """claims.json: every claim's verdict, reason and per-point numbers."""
    from dpkit.base.jsonutil import json_safe

    doc = {"level": LEVEL, "one_sided_alpha": ALPHA, "correction": "holm",
           "interval": "student-t", "power": power.POWER,
           "detectable": "one-sided paired t at one_sided_alpha / points, noncentral t, observed "
                         "sd of the paired differences",
           "claims": [r.to_dict() for r in results]}
    path.write_text(json.dumps(json_safe(doc), indent=2, default=str) + "\n", encoding="utf-8")
