"""Shared utility metrics against hand-checked values and scikit-learn / scipy definitions."""

import math

import pytest
import torch

from dpkit.ml.metrics import accuracy, auc, mean_cosine, mse, spearman


def test_accuracy_and_shape_errors():
    assert accuracy(torch.tensor([1, 0, 1, 1]), [1, 1, 1, 0]) == 0.5
    with pytest.raises(ValueError, match="one shape"):
        accuracy([1, 2], [1])


def test_auc_binary_and_multiclass():
    assert auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert auc(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), [0, 1]) == 1.0
    probs = torch.eye(3)[[0, 1, 2, 0]] * 0.7 + 0.1  # rows sum to 1
    assert auc(probs, [0, 1, 2, 0]) == 1.0


def test_spearman_mse_cosine():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 25]) == pytest.approx(0.8)
    assert mse(torch.zeros(2, 2), torch.ones(2, 2)) == 1.0
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert mean_cosine(x, torch.tensor([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx((1 / math.sqrt(2) + 1) / 2)


def test_mean_over_seeds_never_hides_nan_whatever_the_order():
    import itertools
    import math

    from dpkit.ml.metrics import mean_over_seeds

    for values in ([math.nan, 1.0, 2.0], [math.inf, math.nan], [math.inf, -math.inf, 1.0]):
        for order in itertools.permutations(values):
            assert math.isnan(mean_over_seeds(list(order))), order
    for order in itertools.permutations([math.inf, 1.0, 2.0]):
        assert mean_over_seeds(list(order)) == math.inf
    assert mean_over_seeds([1.0, 2.0, 4.0]) == 7 / 3


def test_report_aggregate_keeps_nan_of_any_seed():
    import math

    from dpkit.report import aggregate

    rows = [{"key": f"k{i}", "seed": i, "method": "m", "point": {}, "metrics": {"acc": v}}
            for i, v in enumerate((0.5, math.nan))]
    for ordered in (rows, rows[::-1]):
        (agg,) = aggregate(ordered)
        assert math.isnan(agg["values"]["acc"])
