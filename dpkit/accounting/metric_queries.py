"""Metric-DP queries of the ledger, by unit (per token, per sequence, per document).

A mixin of :class:`dpkit.accounting.Ledger`: it reads the ledger's recorded metric-DP spends
(``_metric``: releases per guarantee; ``_metric_passes``: passes per guarantee) and answers in
η, never 0 for a release.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.accounting import rules
from dpkit.accounting.guarantees import MetricDpGuarantee
from dpkit.base.errors import AccountingError


class MetricDpQueries:
    """η totals, per-unit dχ parameters and the ε between two documents."""

    _metric: dict[MetricDpGuarantee, int]
    _metric_passes: dict[MetricDpGuarantee, int]
    _none: dict[str, int]
    _spends: list[Any]

    # ------------------------------------------------------------ metric DP
    # A metric-DP spend is one pass over data: ``count`` releases of its unit ("token" or
    # "sequence"), each token or document released at most once in the pass. ``eta`` sums η over
    # every release (count·η); the per-unit totals sum η over passes — the dχ parameter one
    # token, or one document, actually gets. Both units measure two documents by Σᵢ d(xᵢ, x'ᵢ),
    # so a document's ε adds the passes of every unit: (η_token + η_sequence)·Σᵢ dᵢ.
    def eta_totals(self, per_token: bool = False) -> dict[tuple[str, str, str], float]:
        """Σ η per (metric, space, unit): over releases (count·η), or over passes if ``per_token``."""
        return rules.compose_metric((self._metric_passes if per_token else self._metric).items())

    def eta(self, metric: str | None = None, space: str | None = None,
            unit: str | None = None, per_token: bool = False) -> float:
        """Total η of the metric-DP spends matching the filters (they must share one key)."""
        return self._one_total(self.eta_totals(per_token), metric, space, unit)

    def eta_per_token(self, metric: str | None = None, space: str | None = None) -> float:
        """dχ parameter of one token: Σ η over per-token passes (each token released once a pass)."""
        return self._one_total(self.eta_totals(True), metric, space, "token")

    def eta_per_sequence(self, metric: str | None = None, space: str | None = None) -> float:
        """dχ parameter of one document from per-sequence passes (e.g. dχ-STENCIL's η·C)."""
        return self._one_total(self.eta_totals(True), metric, space, "sequence")

    def eta_per_document(self, metric: str | None = None, space: str | None = None) -> float:
        """dχ parameter of one document: Σ η over every pass, per-token and per-sequence."""
        totals: dict[tuple[str, str], float] = {}
        for (m, s, _unit), value in self.eta_totals(True).items():
            totals[(m, s)] = totals.get((m, s), 0.0) + value
        picked = {k: v for k, v in totals.items()
                  if (metric is None or k[0] == metric) and (space is None or k[1] == space)}
        if not picked:
            self._no_metric_spends(f"metric={metric!r}, space={space!r}")
            return 0.0
        if len(picked) > 1:
            raise AccountingError(f"η of different metrics/spaces do not add up: {sorted(picked)}; "
                                  "pass metric= or space= to pick one")
        return next(iter(picked.values()))

    def _one_total(self, totals: dict[tuple[str, str, str], float], metric: str | None,
                   space: str | None, unit: str | None) -> float:
        picked = {k: v for k, v in totals.items()
                  if (metric is None or k[0] == metric) and (space is None or k[1] == space)
                  and (unit is None or k[2] == unit)}
        if len(picked) > 1:
            raise AccountingError(f"η of different metrics/spaces/units do not add up: {sorted(picked)}"
                                  "; pass metric=, space= or unit= to pick one")
        if not picked:
            self._no_metric_spends(f"metric={metric!r}, space={space!r}, unit={unit!r}")
            return 0.0
        return next(iter(picked.values()))

    def _no_metric_spends(self, filters: str) -> None:
        """Raise unless the ledger is empty: 0 is only true when nothing was released."""
        if not self._spends:
            return
        held = sorted(self.eta_totals())
        hint = (f"its metric-DP spends are keyed (metric, space, unit) {held}; pass matching "
                "filters" if held else
                "it holds no metric-DP spend; use epsilon() for (ε, δ)-DP or k_anonymity()")
        raise AccountingError(f"no metric-DP spend matches {filters}, but the ledger records "
                              f"{len(self._spends)} release(s); {hint}")

    def metric_epsilon(self, distances: Any, metric: str | None = None,
                       space: str | None = None) -> float | list[float]:
        """ε between two documents: η_per_document·Σᵢ d(xᵢ, x'ᵢ), distances ``[n]`` or ``[b, n]``.

        Per-token and per-sequence passes both count. Returns ∞ after a NoGuarantee, 0 only for
        an empty ledger, and raises :class:`AccountingError` when the ledger holds releases but
        none in metric DP (their loss is not a dχ quantity: ask :meth:`epsilon` instead).
        """
        if self._none:
            out = rules.document_epsilon(1.0, distances)
            return math.inf if isinstance(out, float) else [math.inf] * len(out)
        return rules.document_epsilon(self.eta_per_document(metric, space), distances)

    def _metric_summary(self) -> dict[str, float]:
        """``eta`` (Σ over releases) and ``eta_per_token`` / ``eta_per_sequence`` (Σ over passes)."""
        out: dict[str, float] = {}
        releases, passes = self.eta_totals(), self.eta_totals(per_token=True)
        if len(releases) == 1:
            out["eta"] = next(iter(releases.values()))
        else:
            out.update({f"eta[{m}:{s}:{u}]": v for (m, s, u), v in releases.items()})
        keyed = len({(m, s) for m, s, _ in passes}) > 1
        for (m, s, u), value in passes.items():
            name = f"eta_per_{u}"
            out[f"{name}[{m}:{s}]" if keyed else name] = value
        return out
