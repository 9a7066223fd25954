"""CellResult: one finished cell, as the runner returns it and ``results.jsonl`` stores it.

One JSON object per line, with exactly the keys below (:meth:`CellResult.to_dict`); reading
(:meth:`CellResult.from_dict`) accepts rows written before a key existed (it gets its default)
and keeps keys it does not know, writing them back unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class CellResult:
    """What one cell produced: where it sits in the spec, its metrics and its privacy."""

    key: str                                   # the cell's stable key (spec content + point + seed)
    method: str                                # the method's label in tables and claims
    seed: int
    spec: str = ""                             # the spec's name
    kind: str = ""                             # "defense" or "mechanism"
    component: str = ""                        # the registered component the method runs
    params: dict[str, Any] = field(default_factory=dict)      # the component's params here
    point: dict[str, Any] = field(default_factory=dict)       # the sweep values of this cell
    data: dict[str, Any] = field(default_factory=dict)        # the dataset reference {name, params}
    metrics: dict[str, float] = field(default_factory=dict)   # utility and attack metrics
    privacy: dict[str, float] = field(default_factory=dict)   # the ledger's summary (epsilon, eta…)
    ledger: dict[str, Any] = field(default_factory=dict)      # the whole ledger (Ledger.to_dict)
    plan: str = ""                             # how the run's ledger compares with its plan
    wire_bytes: dict[str, int] = field(default_factory=dict)  # bytes on the wire, by direction
    training_curves: list[dict[str, Any]] = field(default_factory=list)
    attacks_skipped: list[str] = field(default_factory=list)  # attacks whose inputs were not sent
    device: str = ""
    server: str = ""                           # where the cell's server ran, and how confined
    elapsed_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)       # keys of a newer or older format

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready row written to ``results.jsonl`` (``extra`` keys inlined)."""
        row = asdict(self)
        return {**row.pop("extra"), **row}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> CellResult:
        """A row read from ``results.jsonl`` (missing keys get their defaults)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in row.items() if k in known},
                   extra={k: v for k, v in row.items() if k not in known})

    @property
    def no_guarantee_reasons(self) -> list[str]:
        """The reasons of the cell's ε = ∞ entries (what no guarantee covers)."""
        return list(self.ledger.get("no_guarantee_reasons", []))


def as_results(rows: Any) -> list[CellResult]:
    """``rows`` as :class:`CellResult` s: each is one already, or a row as ``results.jsonl`` holds
    it (a mapping), converted with :meth:`CellResult.from_dict`."""
    return [r if isinstance(r, CellResult) else CellResult.from_dict(dict(r)) for r in rows]
