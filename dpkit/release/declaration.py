"""A :class:`Release`: one kind of tensor a defense sends up, what covers it, and how it is counted.

The wire, not the plug-in, counts a release's units, from what is actually sent and by the unit
the release declares:

- ``"row"`` (default): rows of the tensor (``tensor[rows]`` when a boolean row mask marks the real
  ones, e.g. non-padding tokens of ``[batch, length, d]`` embeddings);
- ``"element"``: elements of the tensor (or of ``tensor[rows]``) — e.g. token ids of a
  ``[documents, length]`` batch;
- ``"send"``: one per send — a whole table, a model, one training step's gradient;
- ``"group"``: the non-empty groups of the rows, given as ``groups=`` lengths that must add up to
  the rows sent — e.g. the documents of a flat ``[tokens, d]`` tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpkit.accounting.guarantees import Guarantee, NoGuarantee
from dpkit.base.errors import AccountingError

if TYPE_CHECKING:
    import torch

UNITS = ("row", "element", "send", "group")


@dataclass(frozen=True)
class Release:
    """One kind of tensor the client sends up, declared before running, and what covers it.

    ``guarantee`` and ``count`` become one ledger spend labelled ``label``. ``covers`` is how many
    units (see the module) the release may put on the wire; it defaults to ``count``. With
    ``reusable`` the same rows may be sent again (e.g. each epoch) at no cost: the wire counts a
    row only when it has not already carried that many copies of it. ``covered_by`` names
    another release whose guarantee already covers this tensor (e.g. attention masks: dχ
    neighbours have equal lengths); it records no spend of its own and ``label`` says why.
    """

    name: str
    guarantee: Guarantee | None
    label: str
    count: int = 1
    covers: int | None = None
    reusable: bool = False
    covered_by: str | None = None
    unit: str = "row"

    def __post_init__(self) -> None:
        if (self.guarantee is None) == (self.covered_by is None):
            raise AccountingError(f"release {self.name!r}: give exactly one of guarantee= "
                                  "(a new ledger spend) or covered_by= (another release's name)")
        if self.count < 0 or (self.covers is not None and self.covers < 0):
            raise AccountingError(f"release {self.name!r}: count and covers must be ≥ 0, got "
                                  f"count={self.count!r}, covers={self.covers!r}")
        if self.unit not in UNITS:
            raise AccountingError(f"release {self.name!r}: unit must be one of {UNITS}, got "
                                  f"{self.unit!r}")
        if self.reusable and self.unit != "row":
            raise AccountingError(f"release {self.name!r}: only row releases can be reusable "
                                  f"(re-sent rows are recognised by content), not unit={self.unit!r}")

    @classmethod
    def uncovered(cls, name: str, reason: str, count: int = 1, reusable: bool = False,
                  unit: str = "row") -> Release:
        """A release nothing covers: ε = ∞ on the ledger with ``reason`` naming the tensor.

        Its ∞ entry is recorded when it is declared, whatever ``count`` says (even 0).
        """
        return cls(name, NoGuarantee(f"{name}: {reason}"), f"{name} (no guarantee)", count,
                   reusable=reusable, unit=unit)

    @property
    def is_uncovered(self) -> bool:
        """Whether the release is an ε = ∞ entry."""
        return isinstance(self.guarantee, NoGuarantee)

    @property
    def limit(self) -> int | None:
        """Units this release may carry (None: unlimited, for ∞ and covered-by releases)."""
        if self.covered_by is not None or self.is_uncovered:
            return None
        return self.count if self.covers is None else self.covers

    def measure(self, real: torch.Tensor, groups: Sequence[int] | torch.Tensor | None) -> int:
        """The units of one send whose real part is ``real``, counted by this release's unit."""
        rows = int(real.shape[0]) if real.ndim else 1
        if self.unit == "send":
            return 1
        if self.unit == "element":
            return int(real.numel())
        if self.unit == "row":
            return rows
        if groups is None:
            raise AccountingError(f"release {self.name!r} counts groups: send it with groups= "
                                  "(the length of each group, e.g. of each document)")
        sizes = [int(g) for g in groups]
        if any(g < 0 for g in sizes) or sum(sizes) != rows:
            raise AccountingError(f"release {self.name!r}: groups= lengths add up to "
                                  f"{sum(sizes)} but {rows} rows were sent; give one length per "
                                  "group of the rows actually sent")
        return sum(1 for g in sizes if g > 0)
