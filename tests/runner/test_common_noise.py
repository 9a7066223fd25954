"""Cells of one spec draw independent release noise unless the spec asks for common draws, and
then every cell's ledger says that releasing them together has no finite ε.

Adversarial case (not in the issue): a server that receives one document at two η with the same
standardized draws recovers it exactly, x = (η₁y₁ − η₂y₂)/(η₁ − η₂), while the ledger composed
the two cells as independent releases.
"""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.contract.plugins import get_registry
from dpkit.release.wire import Wire
from dpkit.runner.execute import execute_cell
from dpkit.runner.plan import plan_spec
from dpkit.spec import load_spec
from dpkit.spec.cells import expand

SPEC = """
name: paired
data: {{name: toy_text, params: {{n_docs: 16}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, label: T, params: {{eta: 1.0}}, sweep: {{eta: [1.0, 3.0]}}}}
seeds: [0]
device: cpu
{privacy}
output: {out}
"""


@pytest.fixture(autouse=True)
def _toy(toy_plugins):
    """The toy data, space and defense."""


def _uploads(tmp_path, monkeypatch, privacy: str) -> tuple[list[torch.Tensor], list, torch.Tensor]:
    """What each of the two cells sent, their results, and the clean embeddings sent."""
    path = tmp_path / "paired.yaml"
    path.write_text(SPEC.format(privacy=privacy, out=tmp_path / "out"))
    registry = get_registry()
    cells = expand(load_spec(path, registry=registry), registry)
    sent: list[torch.Tensor] = []
    real_send = Wire.send

    def recording(self, name, tensor=None):
        if tensor is not None:
            sent.append(tensor.clone())
        return real_send(self, name, tensor)

    monkeypatch.setattr(Wire, "send", recording)
    rows = [execute_cell(c, registry, noise_secret="run-secret", server="inprocess") for c in cells]
    space = registry.build("model", "toy_space", {}).load(torch.device("cpu"))
    data = registry.build("dataset", "toy_text", {"n_docs": 16}).load()
    ids = torch.cat(space.encode(data["test"].texts))
    return sent, rows, space.vectors[ids]


def _reconstruction_error(sent: list[torch.Tensor], clean: torch.Tensor) -> float:
    eta1, eta2 = 1.0, 3.0
    guess = (eta1 * sent[0] - eta2 * sent[1]) / (eta1 - eta2)
    return float((guess - clean).norm(dim=1).mean())


def test_by_default_no_two_cells_share_draws_and_the_document_stays_hidden(tmp_path, monkeypatch):
    sent, rows, clean = _uploads(tmp_path, monkeypatch, "")
    assert _reconstruction_error(sent, clean) > 0.5  # the noise per row is σ = 1 and 1/3
    assert all(math.isfinite(r.privacy["epsilon"]) for r in rows)
    assert all(r.plan == "equal" for r in rows)


def test_common_noise_is_recorded_as_infinite_on_every_cell_and_in_the_plan(tmp_path, monkeypatch):
    sent, rows, clean = _uploads(tmp_path, monkeypatch, "privacy: {common_noise: true}")
    assert _reconstruction_error(sent, clean) < 1e-4  # two η of one draw give x
    for r in rows:
        assert r.privacy["epsilon"] == math.inf and r.plan == "equal"
        assert any("common_noise" in s["guarantee"].get("reason", "") for s in r.ledger["spends"])
    plans = plan_spec(str(tmp_path / "paired.yaml"), get_registry())
    assert all(any("common_noise" in s["guarantee"].get("reason", "") for s in p["spends"])
               for p in plans)


@pytest.mark.parametrize("privacy", ["", "privacy: {common_noise: true}"])
def test_a_cell_rerun_draws_the_same_noise(tmp_path, monkeypatch, privacy):
    """Resuming a run re-releases what was released, nothing new."""
    first, _, _ = _uploads(tmp_path, monkeypatch, privacy)
    second, _, _ = _uploads(tmp_path, monkeypatch, privacy)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
