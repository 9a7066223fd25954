"""Evidence over seeds: spread of every metric, and verdicts of the claims a spec declares.

``stats`` (Student-t summaries, paired one-sided tests, Holm), ``claims`` (the ``claims:`` schema),
``pairing`` (equal sweep values or matched privacy), ``verdict`` (holds / refuted / undecided,
claims.json), ``check`` (claims against a spec's cells before running). See docs/evidence.md.
"""

from __future__ import annotations

from dpkit.evidence.claims import Claim
from dpkit.evidence.stats import Summary, holm, one_sided_p, summarize
from dpkit.evidence.verdict import (
                                    ClaimResult,
                                    evaluate,
                                    evaluate_all,
                                    format_verdicts,
                                    write_claims,
)

__all__ = ["Claim", "ClaimResult", "Summary", "evaluate", "evaluate_all", "format_verdicts",
           "holm", "one_sided_p", "summarize", "write_claims"]
