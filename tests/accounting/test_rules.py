"""Metric-DP and (k, ε)-anonymity composition: sums per key, document ε, diameters, minimum k."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    K_COMPOSITION_NOTE,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    compose_k_anonymity,
    compose_metric,
    document_epsilon,
    table_diameter,
)
from dpkit.accounting.rules import metric_key
from dpkit.base.errors import AccountingError
from dpkit.testing.strategies_accounting import k_anonymity_guarantees, metric_guarantees

counts = st.integers(min_value=1, max_value=50)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(metric_guarantees(spaces=("glove", "bert")), counts), max_size=8))
def test_compose_metric_sums_count_times_eta_per_key(spends):
    totals = compose_metric(spends)
    keys = {(g.metric, g.space, g.unit) for g, _ in spends}
    assert set(totals) == keys
    for key in keys:
        expected = math.fsum(g.eta * c for g, c in spends if (g.metric, g.space, g.unit) == key)
        assert totals[key] == expected


def test_metric_key_is_metric_space_unit():
    assert metric_key(MetricDpGuarantee(1.0, "l2", "glove", "sequence")) == ("l2", "glove", "sequence")
    assert compose_metric([(MetricDpGuarantee(0.1, "l1", "bert"), 3)]) \
        == {("l1", "bert", "token"): math.fsum([0.1 * 3])}


@settings(max_examples=30, deadline=None)
@given(eta=st.floats(1e-3, 100.0),
       rows=st.lists(st.lists(st.floats(0.0, 10.0), min_size=3, max_size=3), min_size=1, max_size=4))
def test_document_epsilon_is_eta_times_summed_distances(eta, rows):
    assert document_epsilon(eta, rows[0]) == pytest.approx(eta * math.fsum(rows[0]), rel=1e-12)
    per_pair = document_epsilon(eta, rows)
    assert per_pair == pytest.approx([eta * math.fsum(r) for r in rows], rel=1e-12)
    assert isinstance(per_pair, list) and all(type(v) is float for v in per_pair)
    scalar = document_epsilon(eta, rows[0][0])
    assert type(scalar) is float and scalar == pytest.approx(eta * rows[0][0], rel=1e-12)


def test_document_epsilon_of_nothing_released_is_zero():
    assert document_epsilon(2.0, []) == 0.0
    assert document_epsilon(2.0, torch.zeros(2, 0)) == [0.0, 0.0]
    assert document_epsilon(2.0, [0.0, 0.0]) == 0.0


@pytest.mark.parametrize("distances", [[1.0, math.inf], [1.0, math.nan], [1.0, -0.5], [-1.0]])
def test_document_epsilon_refuses_bad_distances(distances):
    with pytest.raises(AccountingError, match=r"distances must be finite and non-negative; got "
                                              r"min=.*, max="):
        document_epsilon(1.0, distances)


def test_document_epsilon_refuses_more_than_two_dimensions():
    with pytest.raises(AccountingError, match=r"distances must have shape \[n\] or \[b, n\], got "
                                              r"\(1, 2, 3\)"):
        document_epsilon(1.0, torch.ones(1, 2, 3))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0])
def test_table_diameter_is_the_largest_pairwise_distance(scale):
    table = scale * torch.randn(37, 5, generator=torch.Generator().manual_seed(1))
    expected = float(torch.cdist(table.double(), table.double()).max())
    for chunk in (1, 8, 4096):
        assert table_diameter(table, chunk=chunk) == pytest.approx(expected, rel=1e-9)
    assert table_diameter(table[:1]) == 0.0


@pytest.mark.parametrize("shape", [(0, 3), (4,), (2, 3, 4)])
def test_table_diameter_refuses_what_is_not_a_table(shape):
    with pytest.raises(AccountingError, match=r"expected a non-empty \[V, d\] table, got shape"):
        table_diameter(torch.ones(shape))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(k_anonymity_guarantees(), st.integers(min_value=0, max_value=5)),
                max_size=6))
def test_k_anonymity_takes_min_k_and_adds_epsilon_over_releases(spends):
    total = compose_k_anonymity(spends)
    applied = [(g, c) for g, c in spends if c > 0]
    if not applied:
        assert total is None
        return
    assert total.k_achieved == min(g.k_achieved for g, _ in applied)
    assert total.k_requested == min(g.k_requested for g, _ in applied)
    assert total.share_below_k == max(g.share_below_k for g, _ in applied)
    assert total.epsilon == math.fsum(g.epsilon * c for g, c in applied)
    assert total.releases == sum(c for _, c in applied)
    assert total.note == K_COMPOSITION_NOTE


def test_a_guarantee_applied_zero_times_does_not_lower_k():
    kept = KAnonymityGuarantee(10, 10, 0.0, 1.0)
    unused = KAnonymityGuarantee(10, 2, 0.5, 3.0)
    total = compose_k_anonymity([(kept, 1), (unused, 0)])
    assert (total.k_achieved, total.share_below_k, total.epsilon, total.releases) == (10, 0.0, 1.0, 1)
    assert compose_k_anonymity([(unused, 0)]) is None
