"""The results table and results.csv say what is not covered, beside η per token or per sequence."""

import csv

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.report import render_table, short_reason, write_summary_csv
from dpkit.spec import Spec
from dpkit.release.wire import Release, Wire
from dpkit.base.results import CellResult

GRADIENTS = "training-time gradients of the returned hidden states: not covered"


def _row(seed: int, unit: str, uncovered: bool) -> CellResult:
    ledger = Ledger()
    wire = Wire(ledger)
    releases = [Release("embeddings", MetricDpGuarantee(60.0, "l2", "minilm", unit), "uploads",
                        count=100)]
    if uncovered:
        releases.append(Release.uncovered("gradients", GRADIENTS, count=188))
    wire.declare(releases)
    return CellResult(key=f"k{seed}{unit}{uncovered}", method=f"M-{unit}-{uncovered}",
                      component="c", point={"eta": 60}, seed=seed,
                      metrics={"auc": 0.6 + 0.01 * seed}, privacy=ledger.summary(),
                      ledger=ledger.to_dict(), elapsed_s=1.0)


def _spec() -> Spec:
    return Spec.model_validate({"name": "t", "data": {"name": "d"},
                                "defense": {"name": "hiddenecho"}})


def test_table_shows_infinite_epsilon_with_its_reason_beside_eta(tmp_path):
    rows = [_row(s, unit, bad) for s in (0, 1) for unit, bad in
            (("token", True), ("token", False), ("sequence", False))]
    compact = render_table(_spec(), rows)
    assert "| guarantee" in compact.splitlines()[0]
    line = next(x for x in compact.splitlines() if x.startswith("| M-token-True"))
    assert "η = 60/token, ε = ∞" in line and "| gradients" in line
    sequence = next(x for x in compact.splitlines() if x.startswith("| M-sequence-False"))
    assert "η = 60/sequence" in sequence and "∞" not in sequence
    table = render_table(_spec(), rows, wide=True)
    header = table.splitlines()[0]
    assert "ledger η/token" in header and "ledger η/sequence" in header
    assert "ε = ∞ because" in header
    line = next(x for x in table.splitlines() if x.startswith("| M-token-True"))
    assert "∞" in line and "| gradients" in line
    clean = next(x for x in table.splitlines() if x.startswith("| M-token-False"))
    assert "∞" not in clean and "gradients" not in clean
    assert f"gradients: {GRADIENTS}" in table  # the full reason, once, under the table
    write_summary_csv(rows, tmp_path / "results.csv")
    by_method = {r["method"]: r for r in csv.DictReader((tmp_path / "results.csv").open())}
    assert by_method["M-token-True"]["not_covered"] == f"gradients: {GRADIENTS}"
    assert by_method["M-sequence-False"]["eta_per_sequence.mean"] == "60.0"
    assert by_method["M-sequence-False"]["not_covered"] == ""


def test_short_reason_names_the_tensor():
    assert short_reason("labels: task labels are sent in plaintext") == "labels"
    long = "x" * 80
    assert short_reason(long).endswith("…") and len(short_reason(long)) == 40


def test_cells_still_improving_are_flagged_not_converged():
    rows = [_row(0, "token", False), _row(1, "token", False)]
    rows[1].metrics["converged"] = 0.0
    rows[0].metrics["converged"] = 1.0
    table = render_table(_spec(), rows)
    assert "| M-token-False (not converged)" in table
    rows[1].metrics["converged"] = 1.0
    assert "not converged" not in render_table(_spec(), rows)
