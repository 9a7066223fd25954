"""A message's shape says its row count and its lengths, nothing else: a covered release's first
send fixes its dtype and sizes, and a release's name must be one the server takes."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.accounting import MetricDpGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.shapes import Form, check_form, longest, padding_extent
from dpkit.release.wire import Release
from dpkit.testing.boundary import recording_wire

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def _padded(lengths: list[int], width: int = 3, length: int | None = None) -> torch.Tensor:
    length = max(lengths, default=0) if length is None else length
    out = torch.zeros(len(lengths), length, width)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.rand(n, width) + 1.0
    return out


def test_the_first_send_fixes_the_width_and_dtype_of_a_covered_release():
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=100))
    wire.send("embeddings", torch.ones(2, 3))
    wire.send("embeddings", torch.ones(7, 3))  # another row count: the first dimension is free
    with pytest.raises(AccountingError, match=r"dimension 1 has 4 entries, the first send's 3.*"
                                              r"Nothing was sent"):
        wire.send("embeddings", torch.ones(1, 4))
    with pytest.raises(AccountingError, match="its dtype is float64, the first send's float32"):
        wire.send("embeddings", torch.ones(1, 3, dtype=torch.float64))
    with pytest.raises(AccountingError, match="it has 3 dimensions, the first send 2"):
        wire.send("embeddings", torch.ones(1, 1, 3))
    assert [m["tensor"].shape[0] for m in channel.got] == [2, 7]
    assert wire.units["embeddings"] == 9 and wire.ledger.epsilon() < math.inf


def test_a_message_with_no_unit_keeps_the_first_form_exactly():
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=10))
    wire.send("embeddings", torch.empty(0, 5))  # the first send fixes the form, even an empty one
    wire.send("embeddings", torch.ones(2, 5))
    wire.send("embeddings", torch.empty(0, 5))
    for shape in ((0, 6), (0, 5, 1)):
        with pytest.raises(AccountingError, match="refused"):
            wire.send("embeddings", torch.empty(shape))
    assert len(channel.got) == 3


def test_only_the_first_dimension_or_a_padded_one_may_be_empty():
    wire, _ = recording_wire(Release("embeddings", ETA, "tokens", count=10))
    with pytest.raises(AccountingError, match="dimension 1 has no entries"):
        wire.send("embeddings", torch.empty(4, 0))  # four rows of nothing: no unit, four spelled


def test_padding_may_shrink_to_the_longest_sequence_and_no_further_grow():
    release = Release("embeddings", ETA, "tokens", count=100, padding=0.0)
    wire, channel = recording_wire(release)
    wire.send("embeddings", _padded([3, 5], length=8))  # the first send: padded to a fixed 8
    wire.send("embeddings", _padded([2, 4], length=8))  # the fixed length again
    wire.send("embeddings", _padded([2, 6]))  # dynamic padding: the longest sequence, 6
    with pytest.raises(AccountingError, match="padded dimension 1 has 7 entries but its longest "
                                              "sequence 6"):
        wire.send("embeddings", _padded([2, 6], length=7))  # one column of padding spells a 7
    assert [tuple(m["tensor"].shape) for m in channel.got] == [(2, 8, 3), (2, 8, 3), (2, 6, 3)]
    assert wire.units["embeddings"] == 8 + 6 + 8


def test_a_message_of_padding_only_has_the_first_shape():
    release = Release("embeddings", ETA, "tokens", count=100, padding=0.0)
    wire, _ = recording_wire(release)
    wire.send("embeddings", _padded([3, 5], length=8))
    wire.send("embeddings", torch.zeros(2, 8, 3))  # padding only, the first shape: a schedule
    with pytest.raises(AccountingError, match="carries no unit"):
        wire.send("embeddings", torch.zeros(57, 8, 3))  # 57 sequences of nothing
    assert wire.units["embeddings"] == 8


def test_a_send_release_keeps_its_whole_shape():
    wire, _ = recording_wire(Release("model", ETA, "model", count=3, unit="send"))
    wire.send("model", torch.ones(4, 2))
    wire.send("model", torch.ones(4, 2))
    with pytest.raises(AccountingError, match="a send release keeps its whole shape"):
        wire.send("model", torch.ones(5, 2))


def test_an_uncovered_release_is_not_held_to_a_form():
    wire, channel = recording_wire(Release.uncovered("gradients", "training-time gradients"))
    for shape in ((3, 2), (0, 9), (4, 0), (1, 1, 1)):
        wire.send("gradients", torch.ones(shape))
    assert len(channel.got) == 4 and wire.ledger.epsilon() == math.inf


def test_element_and_group_units_fix_their_lengths_by_padding_alone():
    ids = Release("substituted_ids", ETA, "ids", count=100, unit="element", padding=-1)
    wire, _ = recording_wire(ids)
    wire.send("substituted_ids", torch.tensor([[4, 5, -1], [6, -1, -1]]))
    wire.send("substituted_ids", torch.tensor([[4, 5], [6, -1]]))  # the longest: 2
    with pytest.raises(AccountingError, match="padded dimension 1 has 4 entries"):
        wire.send("substituted_ids", torch.tensor([[4, -1, -1, -1]]))
    docs = Release("embeddings", ETA, "docs", count=10, unit="group", padding=0.0)
    wire, _ = recording_wire(docs)
    wire.send("embeddings", _padded([1, 2]))
    with pytest.raises(AccountingError, match="dimension 2 has 4 entries"):
        wire.send("embeddings", _padded([1, 2], width=4))


def test_form_helpers():
    release = Release("embeddings", ETA, "tokens", count=9, padding=0.0)
    tensor = _padded([1, 3], length=4)
    real = release.real(tensor)
    assert Form.of(tensor) == Form("float32", (2, 4, 3))
    assert padding_extent(real) == (1, 3) and longest(real) == 3
    assert padding_extent(None) is None and padding_extent(torch.tensor(True)) is None
    assert longest(torch.zeros(0, 4, dtype=torch.bool)) == 0
    first = check_form(release, tensor, real, 4, None)
    assert first == Form.of(tensor)
    assert check_form(release, _padded([2]), release.real(_padded([2])), 2, first) == first


def test_an_empty_message_after_rows_keeps_the_row_form():
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=10))
    wire.send("embeddings", torch.ones(2, 5))
    wire.send("embeddings", torch.empty(0, 5))  # no rows, the first send's width
    with pytest.raises(AccountingError, match="carries no unit"):
        wire.send("embeddings", torch.empty(0, 6))
    padded = Release("embeddings", ETA, "tokens", count=10, padding=0.0)
    wire, _ = recording_wire(padded)
    wire.send("embeddings", _padded([1, 2]))
    with pytest.raises(AccountingError, match="carries no unit"):
        wire.send("embeddings", torch.zeros(1, 2, 3))  # one sequence of padding, not the first two
    model = Release("model", ETA, "model", count=3, unit="send")
    wire, _ = recording_wire(model)
    wire.send("model", torch.ones(4, 2))
    with pytest.raises(AccountingError, match="a send release keeps its whole shape"):
        wire.send("model", torch.empty(0, 2))
    assert [tuple(m["tensor"].shape) for m in channel.got] == [(2, 5), (0, 5)]


def test_the_longest_sequence_is_read_along_the_last_dimension():
    real = torch.zeros(2, 3, 4, dtype=torch.bool)
    real[1, 2, :3] = True
    assert longest(real) == 3 and padding_extent(real) == (2, 3)


def test_each_refusal_names_the_form_and_the_fix():
    def refusal(*sends: torch.Tensor, release: Release | None = None) -> str:
        release = release or Release("embeddings", ETA, "tokens", count=100)
        wire, _ = recording_wire(release)
        for tensor in sends[:-1]:
            wire.send(release.name, tensor)
        with pytest.raises(AccountingError) as refused:
            wire.send(release.name, sends[-1])
        return str(refused.value)

    tail = ("A shape crosses uncounted, so a covered release's dtype and sizes other than its row "
            "count are fixed by its first send; ")
    assert refusal(torch.empty(4, 0)) == (
        "release 'embeddings': a float32 [4, 0] tensor is refused: dimension 1 has no entries "
        "(only the first, or a padded one, may be empty). " + tail
        + "send the rows with their full width. Nothing was sent")
    form = " (the release's form: float32 [2, 3])"
    assert refusal(torch.ones(2, 3), torch.empty(4, 0)) == (
        "release 'embeddings': a float32 [4, 0] tensor is refused: dimension 1 has no entries "
        "(only the first, or a padded one, may be empty)" + form + ". " + tail
        + "send the rows with their full width. Nothing was sent")
    assert refusal(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64)) == (
        "release 'embeddings': a float64 [2, 3] tensor is refused: its dtype is float64, the "
        "first send's float32" + form + ". " + tail
        + "convert to the release's dtype before sending. Nothing was sent")
    assert refusal(torch.ones(2, 3), torch.empty(0, 4)) == (
        "release 'embeddings': a float32 [0, 4] tensor is refused: it carries no unit, so its "
        "shape must be the first send's (or that shape with no entries)" + form + ". " + tail
        + "send the release's rows in its first form. Nothing was sent")
    assert refusal(torch.ones(4, 2), torch.ones(3, 2),
                   release=Release("model", ETA, "model", count=3, unit="send")) == (
        "release 'model': a float32 [3, 2] tensor is refused: a send release keeps its whole "
        "shape (the release's form: float32 [4, 2]). " + tail
        + "send the release's rows in its first form. Nothing was sent")
    assert refusal(torch.ones(2, 3), torch.ones(2, 1, 3)) == (
        "release 'embeddings': a float32 [2, 1, 3] tensor is refused: it has 3 dimensions, the "
        "first send 2" + form + ". " + tail + "keep the release's number of dimensions. Nothing "
        "was sent")
    assert refusal(torch.ones(2, 3), torch.ones(2, 4)) == (
        "release 'embeddings': a float32 [2, 4] tensor is refused: its dimension 1 has 4 "
        "entries, the first send's 3" + form + ". " + tail + "only the first dimension (and a "
        "padded one, to its longest sequence) may vary. Nothing was sent")
    padded = Release("embeddings", ETA, "tokens", count=100, padding=0.0)
    assert refusal(_padded([1], length=2), _padded([1], length=3), release=padded) == (
        "release 'embeddings': a float32 [1, 3, 3] tensor is refused: its padded dimension 1 has "
        "3 entries but its longest sequence 1 (the release's form: float32 [1, 2, 3]). " + tail
        + "pad each batch to its longest sequence, or always to the same length. Nothing was "
        "sent")


def test_empty_sequences_ride_only_on_units_the_release_may_carry():
    """How many sequences of padding a counted message holds is structure (open); each such
    message still costs a unit, so without declared slack it is charged ∞."""
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=3, padding=0.0))
    wire.send("embeddings", _padded([3]))
    spelled = _padded([1, 0, 0, 0, 0], length=1)  # five sequences, one real row
    wire.send("embeddings", spelled)
    assert tuple(channel.got[-1]["tensor"].shape) == (5, 1, 3)
    assert wire.units["embeddings"] == 4 and wire.ledger.epsilon() == math.inf


def test_a_padded_release_refuses_another_number_of_dimensions_before_reading_its_padding():
    release = Release("embeddings", ETA, "tokens", count=100, padding=0.0)
    wire, _ = recording_wire(release)
    wire.send("embeddings", torch.ones(3))
    with pytest.raises(AccountingError, match="it has 3 dimensions, the first send 1"):
        wire.send("embeddings", _padded([1, 2]))  # its padded dimension (1) the first lacks
    model = Release("model", ETA, "model", count=3, unit="send")
    wire, _ = recording_wire(model)
    wire.send("model", torch.ones(4, 2))
    with pytest.raises(AccountingError, match="it has 1 dimensions, the first send 2"):
        wire.send("model", torch.ones(8))
