"""The compact default table: headline metrics and guarantees within 120 columns, equal columns
once, constant columns and blanks explained, the guarantee in words with its scale."""

from __future__ import annotations

import pytest

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.report import render_table
from dpkit.report.scale import median_nn_distance
from dpkit.spec import Spec
from dpkit.base.results import CellResult

SPACE = "glove-test[:40]"


def row(method: str, eta: float, seed: int, inverted: bool = True) -> CellResult:
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(eta, "l2", SPACE, "token"), "tokens", count=100)
    recovery = min(1.0, eta / 20 + 0.01 * seed)
    metrics = {"accuracy": 0.4 + eta / 100 + 0.01 * seed, "recovery_at5": recovery,
               "recovery_at1": recovery / 2, "token_preservation": recovery / 2,
               "clean_accuracy": 0.66, "converged": 1.0, "n_docs": 400.0, "n_tokens": 8273.0,
               "train_loss_final": 0.55}
    if inverted:
        metrics["inversion_top1"] = recovery / 2
    return CellResult(key=f"{method}{eta}{seed}", method=method, component="c",
                      point={"eta": eta}, seed=seed, metrics=metrics, privacy=ledger.summary(),
                      ledger=ledger.to_dict(), elapsed_s=1.0,
                      attacks_skipped=[] if inverted else ["nn_inversion"])


@pytest.fixture
def rows():
    return [row(m, eta, s, inverted=m.startswith("dχ")) for m in
            ("dχ-Laplace + nearest token", "Text2Text (cosine decode)")
            for eta in (2.0, 5.0, 10.0, 20.0) for s in range(4)]


@pytest.fixture
def spec():
    return Spec.model_validate({"name": "t", "data": {"name": "d"},
                                "mechanism": {"name": "laplace_dx"},
                                "report": {"x": "eta", "utility": "accuracy",
                                           "privacy": "recovery_at5"}})


@pytest.fixture(autouse=True)
def known_scale(tmp_path, monkeypatch):
    """The scale of SPACE as if measured before (the cache), so no model is loaded here."""
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "nn_distance.json").write_text('{"%s": 2.5}' % SPACE)


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def test_compact_table_fits_120_columns_with_headline_and_guarantee(spec, rows):
    text = render_table(spec, rows)
    lines = table_lines(text)
    assert max(len(line) for line in lines) <= 120
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    assert header == ["method", "eta", "accuracy ↑", "recovery_at5 ↓", "guarantee"]
    assert "η = 10/token" in next(x for x in lines if "| 10 " in x)
    for bookkeeping in ("converged", "n_docs", "train_loss_final", "clean_accuracy"):
        assert bookkeeping not in lines[0]
    assert "Same in every row: seeds 4." in text
    assert "ε = η·d(x, x′)" in text and SPACE in text
    assert "nearest neighbour there: 2.5" in text and "at η = 10, ε ≈ 25" in text
    assert "--wide" in text


def test_wide_shows_every_metric_equal_columns_once_and_blanks_explained(spec, rows):
    text = render_table(spec, rows, wide=True)
    header = table_lines(text)[0]
    assert "recovery_at1" in header and "n_tokens" not in header  # n_tokens is the same everywhere
    assert "token_preservation" not in header
    assert "Equal columns shown once: token_preservation = recovery_at1; ledger η/token = eta" in text
    assert "n_tokens 8273" in text
    assert "–: not measured for that method" in text
    assert "Text2Text (cosine decode): nn_inversion" in text
    assert "ledger η/token" not in header  # equal to the swept eta: said once, under the table


def test_no_finished_cells_yet(spec):
    assert render_table(spec, []) == "(no finished cells yet)"


def test_median_nearest_neighbour_distance_is_measured():
    import torch

    grid = torch.tensor([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [3.0, 2.0]])
    # nearest neighbours: 1, 1, 2, 2 → median of a 4-element sample is the lower middle, 1
    assert median_nn_distance(grid) == 1.0
    assert median_nn_distance(grid * 3) == 3.0
