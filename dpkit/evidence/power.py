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
    """``80 % power at diff ≥ +0.2``: the paired difference at which the run has :data:`POWER` at
    one point; with zero paired spread the sign decides: ``no spread: the sign decides``."""
    if p.diff["sd"] == 0:
        return "no spread: the sign decides"
    return f"{POWER * 100:g} % power at diff {'≥' if direction == 'greater' else '≤'} " \
           f"{_signed(p.detectable)}"


def note(claim, points: list, label) -> str:
    """What the run could have shown, said as to a colleague: "with 4 seeds the run had 80 % power
    to show this if, in truth, A is at most 0.0059 below B in accuracy"; then the seeds the
    paper's effect needs."""
    shown = [p for p in points if math.isfinite(p.detectable)]
    if not shown:
        return "power unknown: a point has fewer than 2 paired seeds"
    spread = [p for p in shown if p.diff["sd"] != 0]
    flat = [p for p in shown if p.diff["sd"] == 0]
    several = len(shown) > 1
    parts = []
    for i, p in enumerate(spread):
        where = "" if not several else f" at {label(p.at)}" if i == 0 else \
            f" at {_value_of(label(p.at))}"
        parts.append(f"{_relation(claim, p, names=i == 0)}{where}")
    texts = []
    if spread:
        seeds = max(p.diff["n"] for p in spread)
        texts.append(f"with {seeds} seeds the run had {POWER * 100:g} % power to show this if, "
                     "in truth, " + ", ".join(parts))
    if flat:
        where = f" at {', '.join(label(p.at) for p in flat)}" if several else ""
        texts.append(f"the paired differences do not vary between seeds{where}, so the sign "
                     f"decides{' there' if several else ''}: this shows wherever {claim.method} is "
                     f"{'above' if claim.direction == 'greater' else 'below'} {_versus(claim)} "
                     f"in {claim.metric}")
    text = "; ".join(texts)
    if claim.paper_effect is None:
        return text + "; no paper effect given"
    given = [p for p in points if math.isfinite(p.paper_effect)]
    effect = (f"{claim.paper_effect:+.3g}" if not isinstance(claim.paper_effect, dict) else
              ", ".join(f"{p.paper_effect:+.3g} at {label(p.at)}" for p in given))
    if not given or any(p.diff["n"] < 2 for p in given):
        return text + f"; the paper's effect {effect}: seeds needed unknown (spread unknown)"
    needed = [p.seeds_for_paper for p in given if p.seeds_for_paper is not None]
    if len(needed) < len(given):
        return text + f"; the paper's effect {effect} is out of reach (more than {MAX_SEEDS:,} seeds)"
    return text + f"; to see the paper's effect {effect} with that power takes ≈ {max(needed)} seeds"


def _relation(claim, p, names: bool = True) -> str:
    """How A must truly stand against B at one point: ``A is at most 0.0059 below B in acc``;
    without ``names`` only the gap (``at most 0.011 below``), for a claim's further points."""
    d, greater = p.detectable, claim.direction == "greater"
    side = "above" if greater else "below"
    if claim.relative:
        gap = f"by at least {_plain(d)}"
    elif (d >= 0) == greater or d == 0:
        gap = f"at least {_plain(d)} {side}"
    else:
        gap = f"at most {_plain(d)} {'below' if greater else 'above'}"
    if not names:
        return gap
    if claim.relative:
        return f"{claim.method} is {side} {_versus(claim)} {gap} in {claim.metric}"
    return f"{claim.method} is {gap} {claim.versus} in {claim.metric}"


def _versus(claim) -> str:
    """B as the difference is tested against it: ``B``, ``B − 0.03`` or ``1.1 × B``."""
    if claim.relative:
        factor = 1 + claim.margin if claim.direction == "greater" else 1 - claim.margin
        return f"{factor:g} × {claim.versus}"
    threshold = claim.threshold()
    if threshold == 0:
        return claim.versus
    return f"{claim.versus} {'+' if threshold > 0 else '−'} {_plain(threshold)}"


def _value_of(located: str) -> str:
    """``eta = 5`` → ``5`` (the axis is named once, at the first point)."""
    return located.partition(" = ")[2] or located


def _plain(x: float) -> str:
    """A magnitude for people: two significant digits, no exponent (0.0059, 0.011, 983)."""
    x = abs(x) + 0.0
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.3g}"
    return f"{x:.2g}" if x >= 1e-4 else f"{x:.1e}"


def _signed(x: float) -> str:
    return f"{'-' if x < 0 else '+'}{_plain(x)}"
