"""The shipped specs: every one declares claims over ≥ 3 seeds and validates, paper variants too."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.spec import load_spec, read_yaml
from dpkit.contract.plugins import get_registry

ROOT = Path(__file__).resolve().parents[2] / "specs"
OWNED = sorted(ROOT.glob("*.yaml"))
PAPER = sorted((ROOT / "paper").glob("*.yaml"))


@pytest.mark.parametrize("path", OWNED, ids=lambda p: p.name)
def test_spec_declares_claims_over_three_seeds(path):
    raw = read_yaml(path)
    assert raw.get("claims"), f"{path.name} declares no claims"
    assert len(raw.get("seeds", [0])) >= 3, f"{path.name} runs fewer than 3 seeds"


@pytest.mark.parametrize("path", OWNED + PAPER, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_spec_validates_with_its_claims(path):
    spec = load_spec(path, registry=get_registry())  # the claims are checked against the expanded cells here
    assert len(spec.seeds) >= 3


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_paper_variant_includes_its_default_and_asks_for_a_gpu(path):
    text = path.read_text(encoding="utf-8")
    assert f"include: ../{path.name}" in text
    spec = load_spec(path, registry=get_registry())
    assert spec.device == "cuda" and spec.name.endswith("-paper")
