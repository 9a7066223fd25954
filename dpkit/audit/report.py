"""Audit results: the verdict, the findings behind it and the witness of a failure."""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dpkit.base.jsonutil import json_safe


class Verdict(str, enum.Enum):
    """PASS: no evidence against the claim; FAIL: the claim is refuted at the stated confidence;
    LAW_MISMATCH: the draws do not follow the output law the mechanism declares (its sampler or
    its declaration is wrong), though sampling did not refute the claim itself;
    INCONCLUSIVE: the audit could not test the claim meaningfully."""

    PASS = "PASS"
    FAIL = "FAIL"
    LAW_MISMATCH = "LAW_MISMATCH"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> int:
        """CLI exit status: 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 4 LAW_MISMATCH."""
        return {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3, "LAW_MISMATCH": 4}[self.value]


@dataclass
class Finding:
    """One measured privacy loss for one input pair by one strategy.

    ``measured`` is a lower bound on ε at ``delta`` (exact strategies: a computed value; sampling
    strategies: a lower confidence bound), ``estimate`` the plug-in estimate, ``claimed`` what the
    declared guarantee allows for this pair, ``event`` the output event (or point) that shows it.
    """

    strategy: str
    pair: str
    distance: float
    claimed: float
    measured: float
    estimate: float
    event: str
    delta: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)

    def violates(self, rel_tol: float, abs_tol: float) -> bool:
        """Whether ``measured`` exceeds ``claimed`` beyond the tolerance."""
        return self.measured > self.claimed * (1 + rel_tol) + abs_tol

    @property
    def ratio(self) -> float:
        """measured / claimed (∞ for a positive measurement against a zero claim)."""
        if self.claimed == 0:
            return math.inf if self.measured > 0 else 0.0
        return self.measured / self.claimed


@dataclass
class AuditReport:
    """Everything one audit found: verdict, reason, witness (on FAIL) and all findings."""

    mechanism: str
    params: dict[str, Any]
    guarantee: str
    verdict: Verdict
    reason: str
    confidence: float
    samples: int
    strategies: list[str]
    witness: Finding | None = None
    findings: list[Finding] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    samples_drawn: int = 0
    draw_seconds: float = 0.0
    claim_kind: str = ""

    @property
    def headline(self) -> Finding | None:
        """The witness on FAIL, else the finding closest to its claim."""
        if self.witness is not None:
            return self.witness
        finite = [f for f in self.findings if math.isfinite(f.measured)]
        return max(finite, key=lambda f: f.ratio) if finite else None

    def one_line(self) -> str:
        """A one-line verdict with the claimed and measured values."""
        head = self.headline
        if head is None:
            values = f"claimed {self.guarantee}"
        else:
            at = f" at d={_num(head.distance)}" if self.claim_kind == "metric" else ""
            values = (f"claimed ε≤{_num(head.claimed)}{at}, measured "
                      f"ε≥{_num(head.measured)} (estimate {_num(head.estimate)}) by {head.strategy}"
                      f" [{head.pair}]")
        return (f"{self.verdict.value}: {self.mechanism} — {values}; confidence "
                f"{self.confidence:g}; {self.reason}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (infinities as strings)."""
        out = asdict(self)
        out["verdict"] = self.verdict.value
        return json_safe(out)


def _num(value: float) -> str:
    return "∞" if value == math.inf else ("−∞" if value == -math.inf else f"{value:.3g}")


