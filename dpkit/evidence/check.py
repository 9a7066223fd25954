"""Checking a spec's claims against its expanded cells, before any cell runs."""

from __future__ import annotations

from dpkit.base.errors import SpecError
from dpkit.evidence.pairing import ClaimError, equal_layout, select
from dpkit.evidence.verdict import resolve


def check_claims(spec, cells) -> None:
    """Raise SpecError (``FILE: claims.N.field — message``) for the first claim that names an
    unknown method, an absent sweep value, or cells it cannot pair unambiguously. Metric names
    are not declared by components, so they are checked on the results (see verdict.py)."""
    rows = list(cells)  # a Cell has the method, point, params and seed claims pair on
    for i, raw in enumerate(getattr(spec, "claims", None) or []):
        claim = resolve(raw, spec.report.x)
        try:
            if claim.at == "equal":
                if not claim.over and any(r.point for r in rows):
                    raise ClaimError("over", "at: equal needs `over:` (the sweep key to compare "
                                     "at) or report.x in the spec")
                compared = [at for at, _, _ in equal_layout(claim, rows)]
                if isinstance(claim.paper_effect, dict):
                    stray = sorted(set(claim.paper_effect) - set(compared))
                    if stray:
                        raise ClaimError("paper_effect", f"paper_effect names {claim.over} = "
                                         f"{', '.join(_shown(v) for v in stray)}, which the claim "
                                         f"does not compare (it compares "
                                         f"{', '.join(_shown(v) for v in compared)})")
            else:
                select(rows, claim, claim.method, "method")
                select(rows, claim, claim.versus, "versus")
        except ClaimError as exc:
            raise SpecError(spec.path, f"claims.{i}.{exc.field}", str(exc)) from None


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
