"""The seeds spec re-runs exactly the claims' cells of specs/dped.yaml (same keys at seed 0)."""

from __future__ import annotations

from pathlib import Path

from dpkit.plugins import get_registry
from dpkit.spec import load_spec
from dpkit.spec.cells import cell_key, expand

SPECS = Path(__file__).resolve().parents[3] / "specs"


def keys(name: str, seed: int | None = None) -> set[str]:
    """Cell keys of a spec, optionally of one seed only."""
    registry = get_registry()
    cells = expand(load_spec(SPECS / name, registry), registry)
    return {cell_key(c) for c in cells if seed is None or c.seed == seed}


def test_seed_zero_of_the_seeds_spec_is_the_main_run():
    extra = keys("dped_seeds.yaml", seed=0) - keys("dped.yaml")
    assert not extra, f"{len(extra)} seed-0 cells of dped_seeds.yaml are not cells of dped.yaml"
