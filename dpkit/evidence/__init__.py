"""Evidence over seeds: spread of every metric, and verdicts of the claims a spec declares.

``stats`` (Student-t summaries, paired one-sided tests, Holm), ``claims`` (the ``claims:`` schema),
``pairing`` (equal sweep values or matched privacy), ``verdict`` (holds / refuted / undecided,
claims.json), ``check`` (claims against a spec's cells before running). See docs/evidence.md.
The names below load on first use: a spec's schema reads ``claims`` without scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpkit.base.lazy import export_lazily

_HOMES = {
    "Claim": "dpkit.evidence.claims",
    "Summary": "dpkit.evidence.stats", "holm": "dpkit.evidence.stats",
    "one_sided_p": "dpkit.evidence.stats", "summarize": "dpkit.evidence.stats",
    "ClaimResult": "dpkit.evidence.verdict", "evaluate": "dpkit.evidence.verdict",
    "evaluate_all": "dpkit.evidence.verdict", "format_verdicts": "dpkit.evidence.verdict",
    "write_claims": "dpkit.evidence.verdict",
}
__all__ = sorted(_HOMES)
__getattr__ = export_lazily(__name__, _HOMES, globals())

if TYPE_CHECKING:  # the real types for mypy and IDEs; nothing below runs
    from dpkit.evidence.claims import (
        Claim as Claim,
    )
    from dpkit.evidence.stats import (
        Summary as Summary,
        holm as holm,
        one_sided_p as one_sided_p,
        summarize as summarize,
    )
    from dpkit.evidence.verdict import (
        ClaimResult as ClaimResult,
        evaluate as evaluate,
        evaluate_all as evaluate_all,
        format_verdicts as format_verdicts,
        write_claims as write_claims,
    )
