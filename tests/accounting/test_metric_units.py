"""Metric DP by unit: per-sequence spends are first-class and no query returns 0 for a release."""

import math

import dp_accounting
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import DpGuarantee, KAnonymityGuarantee, Ledger, MetricDpGuarantee, NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.testing.strategies_accounting import metric_guarantees


def test_one_sequence_spend_gives_eta_times_summed_distances():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(5.0, "l2", "glove", unit="sequence"), "stencil", count=60)
    assert ledger.metric_epsilon([1, 2]) == 15
    assert ledger.eta_per_sequence() == 5.0 and ledger.eta_per_document() == 5.0
    assert ledger.summary() == {"eta": 300.0, "eta_per_sequence": 5.0}
    assert "per token" not in ledger.table() and "per sequence" in ledger.table()


def test_token_and_sequence_passes_add_per_document():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(2.0, "l2", "glove"), "tokens", count=40)
    ledger.spend(MetricDpGuarantee(3.0, "l2", "glove", unit="sequence"), "docs", count=4)
    assert ledger.eta_per_token() == 2.0 and ledger.eta_per_sequence() == 3.0
    assert ledger.metric_epsilon([1.0, 1.0]) == pytest.approx(10.0)
    summary = ledger.summary()
    assert summary["eta_per_token"] == 2.0 and summary["eta_per_sequence"] == 3.0
    assert "eta" not in summary  # releases of tokens and of documents do not add up as one number


def test_queries_refuse_to_answer_zero_for_a_release():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(5.0, "l2", "glove", unit="sequence"), "stencil")
    with pytest.raises(AccountingError, match="eta_per_sequence|unit"):
        ledger.eta_per_token()
    dp = Ledger()
    dp.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "mean")
    with pytest.raises(AccountingError, match="epsilon"):
        dp.metric_epsilon([1.0])
    kanon = Ledger()
    kanon.spend(KAnonymityGuarantee(5, 5, 0.0, 1.0), "tables")
    with pytest.raises(AccountingError):
        kanon.eta()
    assert Ledger().metric_epsilon([1.0, 2.0]) == 0.0  # nothing released: 0 is the truth


def test_no_guarantee_makes_metric_epsilon_infinite():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(5.0, "l2", "glove", unit="sequence"), "stencil")
    ledger.spend(NoGuarantee("stop words verbatim"), "verbatim")
    assert ledger.metric_epsilon([0.1]) == math.inf


def test_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="unit"):
        MetricDpGuarantee(1.0, unit="word")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(metric_guarantees(units=("token", "sequence")),
                          st.integers(min_value=1, max_value=5)), min_size=1, max_size=6),
       st.lists(st.floats(min_value=0.0, max_value=10.0), min_size=1, max_size=8))
def test_document_epsilon_sums_every_pass(spends, distances):
    ledger = Ledger()
    for g, count in spends:
        ledger.spend(g, "pass", count=count)
    per_doc = math.fsum(g.eta for g, _ in spends)
    assert ledger.metric_epsilon(distances) == pytest.approx(per_doc * sum(distances), rel=1e-9)
    by_unit = {u: math.fsum(g.eta for g, _ in spends if g.unit == u) for u in ("token", "sequence")}
    summary = ledger.summary()
    for unit, value in by_unit.items():
        key = f"eta_per_{unit}"
        assert (key in summary) == any(g.unit == unit for g, _ in spends)
        if key in summary:
            assert summary[key] == pytest.approx(value, rel=1e-12)
