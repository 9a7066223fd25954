"""Power of a paired one-sided t test: the smallest effect a run could detect, and the seeds an
effect needs.

A claim's point is tested with the one-sided paired t test at level α/m (α = 0.025, m = the
claim's compared points: the level Holm's first step uses, so Holm is never less powerful). Its
power against a true mean difference δ beyond the threshold, with paired spread σ and n seeds, is
P(T > t_{1−α/m, n−1}) for T noncentral t with n − 1 degrees of freedom and noncentrality δ√n/σ.
The observed sd stands in for σ. See docs/evidence.md.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dpkit.base.lazy import lazy_import

if TYPE_CHECKING:
    from scipy import optimize
    from scipy import stats as st
else:
    optimize, st = lazy_import("scipy.optimize"), lazy_import("scipy.stats")

POWER = 0.8
MAX_SEEDS = 100_000  # beyond this, "needs more than MAX_SEEDS seeds"


def power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Probability that the one-sided t test at level ``alpha`` on ``n`` paired differences of
    spread ``sd`` rejects when their true mean lies ``effect`` beyond the threshold."""
    if n < 2:
        raise ValueError(f"a paired t test needs at least 2 seeds, got n={n}")
    if sd == 0:  # the test is decided by the sign (see stats.one_sided_p)
        return 1.0 if effect > 0 else 0.0
    df = n - 1
    return float(st.nct.sf(st.t.ppf(1 - alpha, df), df, effect * math.sqrt(n) / sd))


def detectable_effect(sd: float, n: int, alpha: float, target: float = POWER) -> float:
    """The smallest true mean difference beyond the threshold that the test at level ``alpha``
    detects with probability ``target`` from ``n`` seeds of paired spread ``sd``
    (NaN below two seeds or with an unknown spread; 0 with zero spread)."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    if sd == 0:
        return 0.0
    df = n - 1
    critical = st.t.ppf(1 - alpha, df)

    def gap(nc: float) -> float:
        return float(st.nct.sf(critical, df, nc)) - target

    high = max(critical, 1.0)
    while gap(high) < 0:
        high *= 2
    return optimize.brentq(gap, 0.0, high, xtol=1e-10) * sd / math.sqrt(n)


def seeds_needed(effect: float, sd: float, alpha: float, target: float = POWER) -> int | None:
    """The fewest seeds (≥ 2) at which the test at level ``alpha`` detects a true difference
    ``effect`` beyond the threshold with probability ``target``, if the paired spread is ``sd``.
    None when no number of seeds does (``effect`` ≤ 0, or more than :data:`MAX_SEEDS`)."""
    if not (effect > 0 and math.isfinite(sd)):
        return None
    if power(effect, sd, 2, alpha) >= target:
        return 2
    low, high = 2, 4  # power rises with n: bracket, then bisect
    while power(effect, sd, high, alpha) < target:
        low, high = high, high * 2
        if high > MAX_SEEDS:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if power(effect, sd, mid, alpha) >= target else (mid, high)
    return high


def annotate(claim, points: list, alpha: float) -> None:
    """Fill each point's ``detectable`` (the difference the run detects at :data:`POWER`, on the
    claim's side of its threshold), ``paper_effect`` and ``seeds_for_paper``, at level
    ``alpha`` / the number of points (the claim's multiple-testing share)."""
    level = alpha / max(len(points), 1)
    greater, threshold = claim.direction == "greater", claim.threshold()
    for p in points:
        sd, n = p.diff["sd"], p.diff["n"]
        mde = detectable_effect(sd, n, level)
        p.detectable = threshold + mde if greater else threshold - mde
        effect = claim.paper_effect_at(p.at)
        p.paper_effect = math.nan if effect is None else effect
        if effect is not None and n >= 2:
            p.seeds_for_paper = seeds_needed(effect - threshold if greater else threshold - effect,
                                             sd, level)


def detectable_text(p, direction: str) -> str:
    """``≥ +0.2``: what the run detects at one point; with zero paired spread the sign decides,
    so any difference strictly beyond the threshold: ``> +0 (no spread)``."""
    if p.diff["sd"] == 0:
        return f"{'>' if direction == 'greater' else '<'} {p.detectable + 0.0:+.3g} (no spread)"
    return f"{'≥' if direction == 'greater' else '≤'} {p.detectable:+.3g}"


def note(claim, points: list, label) -> str:
    """"this run detects ≥ X; the paper's effect Y needs ≈ N seeds", for the verdict line."""
    shown = [p for p in points if math.isfinite(p.detectable)]
    if not shown:
        return "no detectable effect: a point has fewer than 2 paired seeds"
    where = (lambda p: f" at {label(p.at)}") if len(shown) > 1 else (lambda p: "")
    detects = ", ".join(f"{detectable_text(p, claim.direction)}{where(p)}" for p in shown)
    text = f"this run detects {detects} ({POWER * 100:g} % power)"
    if claim.paper_effect is None:
        return text + "; no paper effect given"
    given = [p for p in points if math.isfinite(p.paper_effect)]
    effect = (f"{claim.paper_effect:+.3g}" if not isinstance(claim.paper_effect, dict) else
              ", ".join(f"{p.paper_effect:+.3g} at {label(p.at)}" for p in given))
    if not given or any(p.diff["n"] < 2 for p in given):
        return text + f"; the paper's effect {effect}: seeds needed unknown (spread unknown)"
    needed = [p.seeds_for_paper for p in given if p.seeds_for_paper is not None]
    if len(needed) < len(given):
        return text + f"; the paper's effect {effect} is out of reach (> {MAX_SEEDS:,} seeds)"
    return text + f"; the paper's effect {effect} needs ≈ {max(needed)} seeds"
