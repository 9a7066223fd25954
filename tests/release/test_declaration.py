"""dpkit.release.declaration: a release is checked when it is made, and the units of a send are
counted from the tensor by the release's unit, padding rows (verified, closing each sequence)
excepted."""

import re

import pytest
import torch

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.declaration import UNITS, Release

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def refused(message: str, **fields):
    with pytest.raises(AccountingError, match=f"^{re.escape(message)}$"):
        Release(**{"name": "x", "guarantee": ETA, "label": "x", **fields})


def test_a_release_refuses_what_cannot_be_counted_with_a_clear_message():
    refused("release 'x': guarantee must be a dpkit guarantee (e.g. MetricDpGuarantee, "
            "DpGuarantee, NoGuarantee), got 'eta'; a tensor nothing covers is declared with "
            "Release.uncovered(name, reason)", guarantee="eta")
    for count in (True, -1, 1.0, "2"):
        refused(f"release 'x': count must be an integer ≥ 0, got {count!r}", count=count)
    for covers in (True, False, -1, 2.5):
        refused(f"release 'x': covers must be an integer ≥ 0, got {covers!r}", covers=covers)
    refused(f"release 'x': unit must be one of {UNITS}, got 'token'", unit="token")
    for unit in ("element", "send", "group"):
        refused("release 'x': only row releases can be reusable (re-sent rows are recognised by "
                f"content), not unit={unit!r}", unit=unit, reusable=True)
    refused("release 'x': padding is a (non-NaN) value of rows or elements, not of unit='send'",
            unit="send", padding=0.0)
    refused("release 'x': padding is a (non-NaN) value of rows or elements, not of unit='row'",
            padding=float("nan"))


def test_the_edges_of_what_a_release_accepts():
    for release in (Release("x", ETA, "x", count=0, covers=0), Release("x", ETA, "x", covers=1),
                    Release("x", ETA, "x", reusable=True, padding=-1),
                    *(Release("x", ETA, "x", unit=u, padding=0) for u in ("row", "element", "group"))):
        assert release.guarantee == ETA
    assert Release("x", ETA, "x", count=0, covers=0).limit == 0
    assert Release("x", ETA, "x", count=2, covers=1).limit == 2


def test_rows_are_the_vectors_along_the_last_dimension():
    row = Release("x", ETA, "x")
    assert row.measure(torch.tensor(3.0)) == 1
    assert row.measure(torch.randn(5)) == 5
    assert row.measure(torch.randn(5, 2)) == 5
    assert row.measure(torch.randn(2, 3, 4)) == 6
    assert row.measure(torch.randn(2, 3, 4, 5)) == 24
    assert row.measure(torch.randn(0, 4)) == 0


def test_elements_sends_and_groups_without_padding():
    assert Release("x", ETA, "x", unit="element").measure(torch.randn(2, 3, 4)) == 24
    assert Release("x", ETA, "x", unit="send").measure(torch.randn(2, 3, 4)) == 1
    group = Release("x", ETA, "x", unit="group")
    assert group.measure(torch.randn(3, 5)) == 3
    assert group.measure(torch.randn(2, 3, 4)) == 2
    assert group.measure(torch.randn(3, 0)) == 0  # three groups that hold nothing
    with pytest.raises(AccountingError, match="^" + re.escape(
            "release 'x' counts groups along the first dimension; send a [groups, ...] tensor, "
            "not shape (4,)") + "$"):
        group.measure(torch.randn(4))


def test_padding_rows_of_a_matrix_close_it_and_do_not_count():
    row = Release("x", ETA, "x", padding=0.0)
    rows = torch.randn(4, 3)
    rows[0, 0] = 0.0  # a real row with a zero coordinate
    rows[3] = 0.0
    assert row.real(rows).tolist() == [True, True, True, False]
    assert row.measure(rows) == 3
    assert Release("x", ETA, "x").real(rows) is None


def test_padding_elements_close_each_sequence():
    ids = Release("x", ETA, "x", unit="element", padding=-1)
    assert ids.measure(torch.tensor([5, 0, -1, -1])) == 2
    assert ids.measure(torch.tensor([[5, 0, 3, -1, -1], [1, -1, -1, -1, -1]])) == 4
    assert ids.measure(torch.tensor(-1)) == 0 and ids.measure(torch.tensor(4)) == 1
    for gap in ([5, -1, 3], [5, 3, -1, 4, -1], [[1, 2, 3, 4, 5], [1, 2, 3, -1, 5]],
                [[1, 2, 3, 4, 5, 6], [-1, 2, 3, 4, 5, 6]]):
        with pytest.raises(AccountingError, match="^" + re.escape(
                "release 'x': a padding row (-1) comes before a real one; padding must close each "
                "sequence, so where it falls says only a length") + "$"):
            ids.measure(torch.tensor(gap))


def test_padding_rows_before_real_ones_are_refused_wherever_they_fall():
    row = Release("x", ETA, "x", padding=0.0)
    for at in range(4):
        batch = torch.randn(2, 5, 3)
        batch[1, at] = 0.0
        with pytest.raises(AccountingError, match="padding must close each sequence"):
            row.measure(batch)
    closed = torch.randn(2, 5, 3)
    closed[1, 3:] = 0.0
    assert row.measure(closed) == 8


def test_groups_hold_a_real_row_or_element():
    docs = Release("x", ETA, "x", unit="group", padding=0.0)
    batch = torch.randn(4, 3, 2)
    batch[0, 0, 0] = 0.0  # a real row with a zero coordinate
    batch[1] = 0.0
    batch[2, 1:] = 0.0
    assert docs.real(batch).tolist() == [[True, True, True], [False, False, False],
                                         [True, False, False], [True, True, True]]
    assert docs.measure(batch) == 3
    ids = Release("x", ETA, "x", unit="group", padding=-1)
    assert ids.measure(torch.tensor([[-1, -1], [3, -1], [-1, -1]])) == 1
    assert ids.measure(torch.tensor([[1, 2, 3], [-1, -1, -1]])) == 1


def test_elements_of_a_padded_batch_of_vectors_count_one_by_one():
    ids = Release("x", ETA, "x", unit="element", padding=0.0)
    batch = torch.ones(2, 3, 4)
    batch[1, 2, 1:] = 0.0
    assert ids.measure(batch) == 21


def test_an_uncovered_release_is_an_infinite_entry_named_after_its_tensor():
    assert Release.uncovered("labels", "plaintext labels") == Release(
        "labels", NoGuarantee("labels: plaintext labels"), "labels (no guarantee)", 1,
        reusable=False, unit="row", padding=None)
    assert Release.uncovered("ids", "raw ids", count=0, reusable=True, padding=-1) == Release(
        "ids", NoGuarantee("ids: raw ids"), "ids (no guarantee)", 0, reusable=True, padding=-1)
    ids = Release.uncovered("ids", "raw ids", unit="element")
    assert ids.unit == "element" and ids.is_uncovered and ids.limit is None
