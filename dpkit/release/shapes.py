"""What a message's shape may say: its row count, its lengths, and nothing the client picks.

A tensor crosses with its dtype and shape, which count no unit. Left free, they spell private
data: a width per message, a dtype, a padded length longer than any sequence, or a tensor with
no real row at all, sent again and again. So a covered release's first send fixes its
:class:`Form` — the dtype and every size but the first — and every later send must keep it:

- the first dimension stays free: it is the row (element, group) count the wire charges;
- with declared padding, the padded dimension (the last one the real-row mask has) is either the
  first send's size or exactly the longest real sequence of the message (dynamic padding) — so it says a length,
  which the neighbouring relations of token-level DP treat as public, and nothing else;
- a message that carries no unit (empty, or padding only) has the first send's shape, or that
  shape with no entries; its shape then says only that a message was sent;
- a ``"send"`` release (a table, a model, a gradient) keeps its whole shape.

An uncovered release is exempt: its ε = ∞ entry was recorded when it was declared. What stays
open is what the first send's form says (a dtype and a few sizes, once per release name, and the
names come from the server's vocabulary: :mod:`dpkit.release.labels`), the number of sequences in
a message that carries units, and the lengths — named in the threat model, ``docs/releases.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpkit.base.errors import AccountingError

if TYPE_CHECKING:
    import torch

    from dpkit.release.declaration import Release


@dataclass(frozen=True)
class Form:
    """The dtype and shape of a release's first send, which its later sends must keep."""

    dtype: str
    shape: tuple[int, ...]

    @classmethod
    def of(cls, tensor: torch.Tensor) -> Form:
        """The form of ``tensor`` as it would cross."""
        return cls(str(tensor.dtype).removeprefix("torch."), tuple(int(n) for n in tensor.shape))


def padding_extent(real: torch.Tensor | None) -> tuple[int, int] | None:
    """The dimension padding closes (the real-row mask's last) and the longest real sequence
    along it; None without padding (no mask) or for a single row."""
    if real is None or real.ndim == 0:
        return None
    return real.ndim - 1, longest(real)


def longest(real: torch.Tensor) -> int:
    """The longest real sequence along the mask's last dimension (padding closes each)."""
    if real.numel() == 0:
        return 0
    return int(real.reshape(-1, real.shape[-1]).sum(dim=1).max())


def check_form(release: Release, tensor: torch.Tensor, real: torch.Tensor | None,
               units: int, first: Form | None) -> Form:
    """Refuse a send of ``release`` whose form says more than its units and lengths (see the
    module); returns the release's form (``tensor``'s own on the first send)."""
    form = Form.of(tensor)
    if release.is_uncovered:
        return form
    if first is not None and len(form.shape) != len(first.shape):
        _refuse(release, f"it has {len(form.shape)} dimensions, the first send {len(first.shape)}",
                first, form, "keep the release's number of dimensions")
    extent = padding_extent(real)
    pad = None if extent is None else extent[0]
    if extent is not None and first is not None and form.shape[extent[0]] > extent[1] \
            and form.shape[extent[0]] != first.shape[extent[0]]:
        _refuse(release, f"its padded dimension {extent[0]} has {form.shape[extent[0]]} entries "
                f"but its longest sequence {extent[1]}", first, form,
                "pad each batch to its longest sequence, or always to the same length")
    empty = [d for d in range(1, len(form.shape)) if form.shape[d] == 0 and d != pad]
    if empty:
        _refuse(release, f"dimension {empty[0]} has no entries (only the first, or a padded "
                "one, may be empty)", first, form, "send the rows with their full width")
    if first is None:
        return form
    if form.dtype != first.dtype:
        _refuse(release, f"its dtype is {form.dtype}, the first send's {first.dtype}", first,
                form, "convert to the release's dtype before sending")
    if release.unit == "send" or units == 0:
        if form.shape != first.shape and not (units == 0 and _no_entries(form, first)):
            why = ("it carries no unit, so its shape must be the first send's (or that shape "
                   "with no entries)") if units == 0 else "a send release keeps its whole shape"
            _refuse(release, why, first, form, "send the release's rows in its first form")
        return first
    for d in range(1, len(form.shape)):
        if d != pad and form.shape[d] != first.shape[d]:
            _refuse(release, f"its dimension {d} has {form.shape[d]} entries, the first send's "
                    f"{first.shape[d]}", first, form, "only the first dimension (and a padded "
                    "one, to its longest sequence) may vary")
    return first


def _no_entries(form: Form, first: Form) -> bool:
    return bool(form.shape) and form.shape[0] == 0 and form.shape[1:] == first.shape[1:]


def _refuse(release: Release, why: str, first: Form | None, form: Form, fix: str) -> None:
    fixed = "" if first is None else f" (the release's form: {first.dtype} {list(first.shape)})"
    raise AccountingError(
        f"release {release.name!r}: a {form.dtype} {list(form.shape)} tensor is refused: {why}"
        f"{fixed}. A shape crosses uncounted, so a covered release's dtype and sizes other than "
        f"its row count are fixed by its first send; {fix}. Nothing was sent")
