"""specs/dped.yaml states its verdicts alone: every cell a claim reads runs at least three seeds."""

from __future__ import annotations

from pathlib import Path

from dpkit.evidence.pairing import equal_layout
from dpkit.contract.plugins import get_registry
from dpkit.spec import load_spec
from dpkit.spec.cells import expand

SPECS = Path(__file__).resolve().parents[3] / "specs"


def test_every_claim_of_the_dped_spec_pairs_at_least_three_seeds_at_every_point():
    spec = load_spec(SPECS / "dped.yaml", registry=get_registry())
    rows = expand(spec, get_registry())  # cells pair like finished rows (dpkit.evidence Row)
    assert len(spec.claims) >= 4
    for claim in spec.claims:
        for point, a, b in equal_layout(claim, rows):
            paired = set(a) & set(b)
            assert len(paired) >= 3, f"{claim.title()} at {point}: seeds {sorted(paired)}"


def test_secondary_rows_run_one_seed():
    spec = load_spec(SPECS / "dped.yaml", registry=get_registry())
    claimed = {label for c in spec.claims for label in (c.method, c.versus)}
    for _, entry in spec.methods():
        if entry.display not in claimed:
            assert entry.seeds == [0], entry.display
