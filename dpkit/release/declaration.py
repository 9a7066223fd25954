"""A :class:`Release`: one kind of tensor a defense sends up, what covers it, and how it is counted.

The wire, not the plug-in, counts a release's units, from the bytes that actually cross and by
the unit the release declares:

- ``"row"`` (default): rows of the tensor — the vectors along its last dimension (``[n, d]`` has n
  rows, ``[batch, length, d]`` has batch·length rows, a 1-D tensor one row per element);
- ``"element"``: elements of the tensor — e.g. token ids of a ``[documents, length]`` batch;
- ``"send"``: one per send — a whole table, a model, one training step's gradient;
- ``"group"``: the entries of the first dimension that hold at least one real row (element) —
  e.g. the documents of a ``[documents, length, d]`` batch padded with the declared ``padding``.

Every row (element) counts, except those the wire itself verifies to be the release's declared
``padding`` value, and padding must close each sequence (a suffix along the last row dimension),
so where it falls says nothing but a length. Nothing about a send is the caller's word: no mask,
no lengths — the structure the server sees is the padding the wire verified.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpkit.accounting.guarantees import (DpGuarantee, Guarantee, KAnonymityGuarantee, MetricDpGuarantee,
                                         NoGuarantee)
from dpkit.base.errors import AccountingError
from dpkit.release.labels import short_label

if TYPE_CHECKING:
    import torch

UNITS = ("row", "element", "send", "group")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
"""What a release name may be: it crosses the wire with each message (see :mod:`dpkit.release.labels`)."""


@dataclass(frozen=True)
class Release:
    """One kind of tensor the client sends up, declared before running, and what covers it.

    ``guarantee`` and ``count`` become one ledger spend labelled ``label``. ``covers`` is how many
    units (see the module) the release may put on the wire, at least ``count`` and by default
    ``count``; a release with ``count = 0`` carries nothing (an ∞ release carries anything, its
    entry is already ∞). With ``reusable`` the same rows may be sent again (e.g. each epoch) at no
    cost: a row counts only beyond the copies of its content already carried. ``padding`` is the
    value of rows (elements) that carry nothing; the wire verifies them and derives the mask the
    server receives.
    """

    name: str
    guarantee: Guarantee
    label: str
    count: int = 1
    covers: int | None = None
    reusable: bool = False
    unit: str = "row"
    padding: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise AccountingError(f"release name {short_label(self.name)} must be a plain name "
                                  "(a letter or _, then up to 63 letters, digits, _ . or -): it "
                                  "crosses the wire with every message, uncounted, so it stays a "
                                  "short plain label")
        kinds = (DpGuarantee, MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee)
        if not isinstance(self.guarantee, kinds):
            raise AccountingError(f"release {self.name!r}: guarantee must be a dpkit guarantee "
                                  f"(e.g. MetricDpGuarantee, DpGuarantee, NoGuarantee), got "
                                  f"{self.guarantee!r}; a tensor nothing covers is declared with "
                                  "Release.uncovered(name, reason)")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise AccountingError(f"release {self.name!r}: count must be an integer ≥ 0, got "
                                  f"{self.count!r}")
        if self.covers is not None and (isinstance(self.covers, bool)
                                        or not isinstance(self.covers, int) or self.covers < 0):
            raise AccountingError(f"release {self.name!r}: covers must be an integer ≥ 0, got "
                                  f"{self.covers!r}")
        if self.unit not in UNITS:
            raise AccountingError(f"release {self.name!r}: unit must be one of {UNITS}, got "
                                  f"{self.unit!r}")
        if self.reusable and self.unit != "row":
            raise AccountingError(f"release {self.name!r}: only row releases can be reusable "
                                  f"(re-sent rows are recognised by content), not unit={self.unit!r}")
        if self.padding is not None and (self.unit == "send" or math.isnan(float(self.padding))):
            raise AccountingError(f"release {self.name!r}: padding is a (non-NaN) value of rows "
                                  f"or elements, not of unit={self.unit!r}")

    @classmethod
    def uncovered(cls, name: str, reason: str, count: int = 1, reusable: bool = False,
                  unit: str = "row", padding: float | None = None) -> Release:
        """A release nothing covers: ε = ∞ on the ledger with ``reason`` naming the tensor.

        Its ∞ entry is recorded when it is declared, whatever ``count`` says (even 0).
        """
        return cls(name, NoGuarantee(f"{name}: {reason}"), f"{name} (no guarantee)", count,
                   reusable=reusable, unit=unit, padding=padding)

    @property
    def is_uncovered(self) -> bool:
        """Whether the release is an ε = ∞ entry."""
        return isinstance(self.guarantee, NoGuarantee)

    @property
    def limit(self) -> int | None:
        """Units this release may carry (None: unlimited, for an ∞ release)."""
        if self.is_uncovered:
            return None
        if self.count == 0:
            return 0
        return self.count if self.covers is None else max(self.covers, self.count)

    def real(self, tensor: torch.Tensor) -> torch.Tensor | None:
        """Boolean mask of the rows (``"row"``: shape ``tensor.shape[:-1]``) or elements that are
        not the declared padding; None when nothing is declared padding. Raises when padding
        does not close each sequence."""
        if self.padding is None:
            return None
        pad = tensor.new_tensor(self.padding)
        if (self.unit == "row" and tensor.ndim >= 2) or (self.unit == "group" and tensor.ndim >= 3):
            real = (tensor != pad).any(dim=-1)
        else:
            real = tensor != pad
        if real.ndim >= 1 and bool((real[..., 1:] & ~real[..., :-1]).any()):
            raise AccountingError(
                f"release {self.name!r}: a padding row ({self.padding!r}) comes before a real "
                "one; padding must close each sequence, so where it falls says only a length")
        return real

    def measure(self, tensor: torch.Tensor) -> int:
        """The units of one send of ``tensor``, counted by this release's unit."""
        if self.unit == "send":
            return 1
        real = self.real(tensor)
        if self.unit == "element":
            return int(tensor.numel()) if real is None else int(real.sum())
        if self.unit == "row":
            return _rows(tensor) if real is None else int(real.sum())
        if tensor.ndim < 2:
            raise AccountingError(f"release {self.name!r} counts groups along the first "
                                  f"dimension; send a [groups, ...] tensor, not shape "
                                  f"{tuple(tensor.shape)}")
        if real is None:
            return int(tensor.shape[0]) if tensor.numel() else 0
        return int(real.reshape(real.shape[0], -1).any(dim=1).sum())

def _rows(tensor: torch.Tensor) -> int:
    """Rows of ``tensor``: the vectors along its last dimension (one per element of a 1-D one)."""
    if tensor.ndim == 0:
        return 1
    return math.prod(tensor.shape[:-1]) if tensor.ndim >= 2 else int(tensor.shape[0])
