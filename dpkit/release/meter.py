"""The meter: what each release may carry, what it carried, and the ledger entries that cover it.

A :class:`Meter` belongs to the runner, bound to one cell's ledger. The wire asks it to admit
every send *before* the bytes cross: an undeclared release, or units beyond a declaration, are
recorded on the ledger as ε = ∞ there and then — so a ledger guard (a budget cap) refuses the
send before anything is released, and a run that fails afterwards has already been charged for
what crossed.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import torch

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.declaration import Release
from dpkit.release.labels import Labels
from dpkit.release.shapes import Form, check_form

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Ledger, Spend

UP, DOWN = "up", "down"


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of ``tensor`` as sent: element count times element size."""
    return tensor.numel() * tensor.element_size()


def _row_digests(rows: torch.Tensor) -> list[bytes]:
    flat = rows.reshape(rows.shape[0], -1).contiguous().numpy()
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


class Meter:
    """Declared releases, units and bytes carried, and their ledger spends (see module docstring)."""

    def __init__(self, ledger: Ledger):
        self._ledger = ledger
        self._releases: dict[str, Release] = {}
        self._spends: dict[str, Spend] = {}
        self._units: dict[str, int] = defaultdict(int)
        self._seen: dict[str, Counter[bytes]] = {}
        self._over: set[str] = set()
        self._forms: dict[str, Form] = {}
        self.totals: dict[tuple[str, str, str], int] = defaultdict(int)
        self.messages: dict[str, int] = defaultdict(int)
        self.batches: dict[str, int] = defaultdict(int)
        self.closed = False
        self.labels: Labels | None = None
        """What the server said it takes (:mod:`dpkit.release.labels`), asked before the first send."""

    @property
    def ledger(self) -> Ledger:
        """The ledger every declaration and excess is recorded on (fixed at construction)."""
        return self._ledger

    @property
    def releases(self) -> Mapping[str, Release]:
        """Declared releases by name (read-only)."""
        return MappingProxyType(self._releases)

    @property
    def spends(self) -> Mapping[str, Spend]:
        """The ledger spend of each release that recorded one (read-only)."""
        return MappingProxyType(self._spends)

    @property
    def units(self) -> Mapping[str, int]:
        """Units each release has carried so far, as the meter counted them (read-only)."""
        return MappingProxyType(self._units)

    def declare(self, releases: Iterable[Release]) -> list[Spend]:
        """Record each release on the ledger (one spend each) before anything is sent."""
        recorded = []
        for release in releases:
            if not isinstance(release, Release):
                raise AccountingError(f"declare takes dpkit.Release objects, got {release!r}")
            if release.name in self._releases:
                raise AccountingError(f"release {release.name!r} is declared twice; give each "
                                      "tensor that crosses the wire one release")
            self._releases[release.name] = release
            if release.count > 0 or release.is_uncovered:
                spend = self._ledger.spend(release.guarantee, release.label, max(release.count, 1))
                self._spends[release.name] = spend
                recorded.append(spend)
        return recorded

    def admit(self, name: str, tensor: torch.Tensor | None) -> torch.Tensor | None:
        """Count one send of ``tensor`` under ``name`` and charge what no declaration covers,
        before it crosses; returns the real-row mask (None: no padding declared). A request
        (no tensor) carries only its name, which must be one the server handles."""
        if self.closed:
            raise AccountingError(f"the wire is closed; {name!r} was sent after the run ended")
        if tensor is None:
            self.messages[name] += 1
            return None
        release = self._releases.get(name)
        if release is None:
            self.declare([Release.uncovered(name, "sent to the server without a declared "
                                                  "release")])
            release = self._releases[name]
        real = release.real(tensor)
        measured = release.measure(tensor)
        self._forms[name] = check_form(release, tensor, real, measured, self._forms.get(name))
        if release.reusable:
            rows = tensor.reshape(-1, tensor.shape[-1]) if tensor.ndim >= 2 else tensor.reshape(-1, 1)
            measured = self._new_rows(name, rows if real is None else rows[real.reshape(-1)])
        carried = self._units[name] + measured
        if release.limit is not None and carried > release.limit and name not in self._over:
            self._ledger.spend(NoGuarantee(
                f"{name}: {carried} units crossed the wire but the release declared "
                f"{release.limit}; the excess is not covered"), f"{name} (over declaration)")
            self._over.add(name)
        self._units[name] = carried
        self.messages[name] += 1
        return real

    def _new_rows(self, name: str, rows: torch.Tensor) -> int:
        """Rows beyond the copies of each row content this release already carried."""
        now = Counter(_row_digests(rows))
        seen = self._seen.setdefault(name, Counter())
        new = sum(max(0, n - seen[d]) for d, n in now.items())
        for digest, n in now.items():
            seen[digest] = max(seen[digest], n)
        return new

    def meter(self, phase: str, direction: str, name: str, nbytes: int) -> None:
        """Add ``nbytes`` to the byte total of (phase, direction, name)."""
        self.totals[(phase, direction, name)] += nbytes

    def excess(self) -> list[str]:
        """Releases that carried more units than they declared."""
        return sorted(self._over)
