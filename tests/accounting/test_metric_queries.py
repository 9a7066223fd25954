"""The ledger's η answers pick exactly the spends their filters name, and refuse to add η across
metrics, spaces or units — on a ledger holding several of each."""

import math
import re

import dp_accounting
import pytest

from dpkit.accounting import DpGuarantee, Ledger, MetricDpGuarantee, NoGuarantee
from dpkit.base.errors import AccountingError


@pytest.fixture
def ledger():
    """Two passes of glove tokens (16 releases at η = 2), bert tokens, cosine tokens and glove
    sequences: every filter picks a different total."""
    book = Ledger()
    book.spend(MetricDpGuarantee(2.0, "l2", "glove"), "glove tokens", count=10)
    book.spend(MetricDpGuarantee(2.0, "l2", "glove"), "glove tokens again", count=6)
    book.spend(MetricDpGuarantee(3.0, "l2", "bert"), "bert tokens", count=5)
    book.spend(MetricDpGuarantee(7.0, "cosine", "glove"), "cosine tokens", count=1)
    book.spend(MetricDpGuarantee(11.0, "l2", "glove", unit="sequence"), "documents", count=4)
    return book


def refused(message: str):
    return pytest.raises(AccountingError, match=f"^{re.escape(message)}$")


def test_eta_sums_releases_or_passes_of_the_one_key_its_filters_name(ledger):
    assert ledger.eta(metric="l2", space="glove", unit="token") == 32.0
    assert ledger.eta(metric="l2", space="glove", unit="token", per_token=True) == 4.0
    assert ledger.eta(metric="cosine") == 7.0
    assert ledger.eta(space="bert") == 15.0
    assert ledger.eta(metric="l2", space="glove", unit="sequence") == 44.0
    assert ledger.eta(metric="l2", space="glove", unit="sequence", per_token=True) == 11.0


def test_eta_refuses_to_add_keys_and_names_the_filters(ledger):
    keys = [("cosine", "glove", "token"), ("l2", "glove", "token")]
    with refused(f"η of different metrics/spaces/units do not add up: {keys}; pass metric=, "
                 "space= or unit= to pick one"):
        ledger.eta(space="glove", unit="token")


def test_per_unit_queries_filter_by_metric_and_space(ledger):
    assert ledger.eta_per_token(metric="cosine") == 7.0
    assert ledger.eta_per_token(space="bert") == 3.0
    assert ledger.eta_per_token(metric="l2", space="glove") == 4.0
    assert ledger.eta_per_sequence(metric="l2", space="glove") == 11.0
    assert ledger.eta_per_sequence(space="glove") == 11.0
    with refused("no metric-DP spend matches metric='cosine', space=None, unit='sequence', but "
                 "the ledger records 5 release(s); its metric-DP spends are keyed (metric, space, "
                 "unit) [('cosine', 'glove', 'token'), ('l2', 'bert', 'token'), "
                 "('l2', 'glove', 'sequence'), ('l2', 'glove', 'token')]; pass matching filters"):
        ledger.eta_per_sequence(metric="cosine")


def test_a_document_adds_its_token_and_sequence_passes_per_metric_and_space(ledger):
    assert ledger.eta_per_document(metric="l2", space="glove") == 15.0
    assert ledger.eta_per_document(metric="cosine") == 7.0
    assert ledger.eta_per_document(space="bert") == 3.0
    assert ledger.eta_per_document(metric="cosine", space="glove") == 7.0
    with refused("η of different metrics/spaces do not add up: [('l2', 'bert'), ('l2', 'glove')]; "
                 "pass metric= or space= to pick one"):
        ledger.eta_per_document(metric="l2")
    with refused("no metric-DP spend matches metric='cosine', space='bert', but the ledger "
                 "records 5 release(s); its metric-DP spends are keyed (metric, space, unit) "
                 "[('cosine', 'glove', 'token'), ('l2', 'bert', 'token'), "
                 "('l2', 'glove', 'sequence'), ('l2', 'glove', 'token')]; pass matching filters"):
        ledger.eta_per_document(metric="cosine", space="bert")


def test_metric_epsilon_uses_the_document_eta_its_filters_name(ledger):
    assert ledger.metric_epsilon([1.0, 2.0], metric="cosine") == pytest.approx(21.0)
    assert ledger.metric_epsilon([1.0, 2.0], space="bert") == pytest.approx(9.0)
    assert ledger.metric_epsilon([[1.0], [2.0]], metric="l2", space="glove") == pytest.approx(
        [15.0, 30.0])


def test_after_a_release_without_guarantee_every_document_pair_is_infinite(ledger):
    ledger.spend(NoGuarantee("verbatim words"), "verbatim")
    assert ledger.metric_epsilon([[0.1, 0.2], [0.0, 0.3], [1.0, 1.0]]) == [math.inf] * 3
    assert ledger.metric_epsilon([0.1]) == math.inf


def test_a_ledger_without_metric_spends_says_which_query_to_use():
    book = Ledger()
    book.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "mean")
    with refused("no metric-DP spend matches metric=None, space=None, unit=None, but the ledger "
                 "records 1 release(s); it holds no metric-DP spend; use epsilon() for (ε, δ)-DP "
                 "or k_anonymity()"):
        book.eta()


def test_per_sequence_picks_the_space_it_names():
    book = Ledger()
    book.spend(MetricDpGuarantee(5.0, "l2", "glove", unit="sequence"), "glove documents")
    book.spend(MetricDpGuarantee(6.0, "l2", "bert", unit="sequence"), "bert documents")
    assert book.eta_per_sequence(space="bert") == 6.0
    assert book.eta_per_sequence(space="glove") == 5.0
