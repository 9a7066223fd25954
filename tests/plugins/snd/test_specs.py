"""The hiddenecho spec's SnD baseline trains exactly specs/snd.yaml's SnD denoisers."""

from __future__ import annotations

from pathlib import Path

from dpkit.contract.plugins import get_registry
from dpkit.spec import load_spec

SPECS = Path(__file__).resolve().parents[3] / "specs"


def snd_denoisers(name: str) -> list[dict]:
    """The denoiser settings of every method of a spec that runs the ``snd`` defense."""
    spec = load_spec(SPECS / name, registry=get_registry())
    methods = [spec.defense, *spec.baselines]
    return [dict(m.params)["denoiser"] for m in methods if m.name == "snd"]


def test_hiddenecho_snd_baseline_shares_the_snd_spec_denoisers():
    own, noiseless = snd_denoisers("snd.yaml")  # SnD and its η = ∞ ceiling row
    assert noiseless == own
    (baseline,) = snd_denoisers("hiddenecho.yaml")
    assert baseline == own, ("specs/hiddenecho.yaml's SnD baseline must train the same denoisers "
                             "as specs/snd.yaml (same settings, shared cache, same convergence)")
