"""The one release path: every tensor a defense sends to the untrusted side crosses a :class:`Wire`.

A defense declares its :class:`Release`\\ s before anything is sent (each becomes one ledger spend,
an uncovered one a :class:`~dpkit.accounting.NoGuarantee` naming the tensor), then sends tensors
by release name. The wire meters bytes for every defense, keeps what the server observed for the
attacks' view, and at :meth:`Wire.close` records an ∞ entry for anything that crossed beyond its
declaration — the ledger never under-states.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from dpkit.accounting.guarantees import Guarantee, NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.view import ServerView

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Ledger, Spend

UP = "up"
DOWN = "down"


@dataclass(frozen=True)
class Release:
    """One kind of tensor the client sends up, declared before running, and what covers it.

    ``guarantee`` and ``count`` become one ledger spend labelled ``label``. ``covers`` is how many
    units (rows, unless a send says otherwise) the release may put on the wire; it defaults to
    ``count``. With ``reusable`` the same rows may be sent again (e.g. each epoch) at no cost:
    the wire counts distinct rows. ``covered_by`` names another release whose guarantee already
    covers this tensor (e.g. attention masks: dχ neighbours have equal lengths); it records no
    spend of its own and ``label`` says why.
    """

    name: str
    guarantee: Guarantee | None
    label: str
    count: int = 1
    covers: int | None = None
    reusable: bool = False
    covered_by: str | None = None

    def __post_init__(self) -> None:
        if (self.guarantee is None) == (self.covered_by is None):
            raise AccountingError(f"release {self.name!r}: give exactly one of guarantee= "
                                  "(a new ledger spend) or covered_by= (another release's name)")
        if self.count < 0 or (self.covers is not None and self.covers < 0):
            raise AccountingError(f"release {self.name!r}: count and covers must be ≥ 0, got "
                                  f"count={self.count!r}, covers={self.covers!r}")

    @classmethod
    def uncovered(cls, name: str, reason: str, count: int = 1, reusable: bool = False) -> Release:
        """A release nothing covers: ε = ∞ on the ledger with ``reason`` naming the tensor."""
        return cls(name, NoGuarantee(f"{name}: {reason}"), f"{name} (no guarantee)", count,
                   reusable=reusable)

    @property
    def limit(self) -> int | None:
        """Units this release may carry (None: unlimited, for ∞ and covered-by releases)."""
        if self.covered_by is not None or isinstance(self.guarantee, NoGuarantee):
            return None
        return self.count if self.covers is None else self.covers


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a.cpu(), b.cpu()))
    return False


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of ``tensor`` as sent: element count times element size."""
    return tensor.numel() * tensor.element_size()


def _row_digests(rows: torch.Tensor) -> list[bytes]:
    flat = rows.detach().reshape(rows.shape[0], -1).cpu().contiguous().numpy()
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


@dataclass
class Wire:
    """Metered client–server channel bound to one ledger; see the module docstring."""

    ledger: Ledger
    phase: str = "run"
    totals: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    batches: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    observed: dict[str, Any] = field(default_factory=dict)
    releases: dict[str, Release] = field(default_factory=dict)
    spends: dict[str, Spend] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    derived: dict[str, tuple[str, ...]] = field(default_factory=dict)
    declared_by: set[int] = field(default_factory=set)
    _seen: dict[str, set[bytes]] = field(default_factory=dict)
    _keep: dict[str, int] = field(default_factory=dict)
    _parts: dict[str, list[torch.Tensor]] = field(default_factory=lambda: defaultdict(list))
    _closed: bool = False

    # ------------------------------------------------------------------ declaring
    def declare(self, releases: Iterable[Release]) -> list[Spend]:
        """Record each release on the ledger (one spend each) before anything is sent."""
        recorded = []
        for release in releases:
            if release.name in self.releases:
                raise AccountingError(f"release {release.name!r} is declared twice; give each "
                                      "tensor that crosses the wire one release")
            if release.covered_by is not None and release.covered_by not in self.releases:
                raise AccountingError(f"release {release.name!r} is covered_by "
                                      f"{release.covered_by!r}, which is not declared before it")
            self.releases[release.name] = release
            if release.guarantee is not None and release.count > 0:
                spend = self.ledger.spend(release.guarantee, release.label, release.count)
                self.spends[release.name] = spend
                recorded.append(spend)
        return recorded

    # -------------------------------------------------------------------- sending
    def send(self, name: str, tensor: torch.Tensor, direction: str = UP, *,
             units: int | None = None, rows: torch.Tensor | None = None,
             observe: str | None = None, observe_rows: torch.Tensor | None = None,
             requires_grad: bool = False) -> torch.Tensor:
        """Send ``tensor`` one way; returns the receiver's detached copy (a leaf if ``requires_grad``).

        Up-sends need a declared release named ``name`` (an undeclared one is recorded as ε = ∞).
        ``units`` is how many units this send releases (default: rows of ``tensor``, or of
        ``tensor[rows]`` when a boolean ``rows`` mask marks the real rows, e.g. non-padding).
        ``observe`` keeps the sent rows (``tensor[rows]``, or ``tensor[observe_rows]`` to keep
        fewer, e.g. no special tokens) under that view key for the attacks.
        """
        if direction not in (UP, DOWN):
            raise ValueError(f"wire direction must be {UP!r} or {DOWN!r}, got {direction!r}")
        if self._closed:
            raise AccountingError(f"wire is closed; {name!r} was sent after the run ended")
        self.totals[(self.phase, direction, name)] += tensor_bytes(tensor)
        real = tensor[rows.bool()] if rows is not None else tensor
        if direction == UP:
            self._count(name, real, units)
        received = tensor.detach()
        if observe is not None:
            shown = tensor[observe_rows.bool()] if observe_rows is not None else real
            self._observe(observe, shown.detach())
        return received.requires_grad_(True) if requires_grad else received

    def _count(self, name: str, real: torch.Tensor, units: int | None) -> None:
        release = self.releases.get(name)
        if release is None:
            release = Release.uncovered(name, "sent to the server without a declared release",
                                        count=1)
            self.declare([release])
        if release.reusable and units is None and real.ndim:
            seen = self._seen.setdefault(name, set())
            before = len(seen)
            seen.update(_row_digests(real))
            self.units[name] += len(seen) - before
        else:
            self.units[name] += units if units is not None else (real.shape[0] if real.ndim else 1)

    def _observe(self, key: str, rows: torch.Tensor) -> None:
        cap = self._keep.get(key)
        have = sum(p.shape[0] if p.ndim else 1 for p in self._parts[key])
        if cap is not None and have >= cap:
            return
        self._parts[key].append(rows if cap is None or not rows.ndim else rows[:cap - have])
        parts = self._parts[key]
        self.observed[key] = torch.cat(parts) if parts[0].ndim else parts[-1]

    def keep(self, key: str, rows: int | None) -> None:
        """Keep at most ``rows`` rows of what is observed under ``key`` (None: keep all)."""
        if rows is None:
            self._keep.pop(key, None)
        else:
            self._keep[key] = int(rows)

    def derive(self, key: str, fn: Callable[..., Any], *sources: str) -> Any:
        """A server-side computation on observed tensors only, added to the view under ``key``."""
        missing = [s for s in sources if s not in self.observed]
        if missing:
            raise AccountingError(f"derive {key!r}: {missing} never crossed the wire; the server "
                                  f"can only compute from what it observed ({sorted(self.observed)})")
        value = fn(*(self.observed[s] for s in sources))
        self.observed[key] = value
        self.derived[key] = tuple(sources)
        return value

    def end_batch(self) -> None:
        """Mark the end of one batch of the current phase."""
        self.batches[self.phase] += 1

    # ------------------------------------------------------------------- results
    def close(self) -> list[Spend]:
        """End the run: any release that carried more units than declared is recorded as ε = ∞."""
        if self._closed:
            return []
        self._closed = True
        extra = []
        for name, sent in sorted(self.units.items()):
            release = self.releases[name]
            if release.limit is not None and sent > release.limit:
                reason = (f"{name}: {sent} units crossed the wire but the release declared "
                          f"{release.limit}; the excess is not covered")
                extra.append(self.ledger.spend(NoGuarantee(reason), f"{name} (over declaration)"))
        return extra

    def view(self, knowledge: dict[str, Any] | None = None,
             truth: dict[str, Any] | None = None) -> ServerView:
        """The attacks' view: what crossed (or was derived from it), plus knowledge and truth."""

        return ServerView(observed=dict(self.observed), knowledge=dict(knowledge or {}),
                          truth=dict(truth or {}))

    def unsent(self, view: ServerView | None) -> list[str]:
        """Keys of ``view.observed`` that hold something other than what crossed this wire."""
        if view is None:
            return []
        return sorted(key for key, value in view.observed.items()
                      if not _same(value, self.observed.get(key, _MISSING)))

    def bytes(self, phase: str | None = None, direction: str | None = None,
              name: str | None = None) -> int:
        """Total bytes so far, optionally restricted to a phase, a direction and/or a name."""
        return sum(n for (p, d, k), n in self.totals.items()
                   if (phase is None or p == phase) and (direction is None or d == direction)
                   and (name is None or k == name))

    def per_batch(self, phase: str, direction: str | None = None) -> float:
        """Mean bytes per batch of ``phase`` (0 when no batch ran)."""
        n = self.batches.get(phase, 0)
        return self.bytes(phase, direction) / n if n else 0.0

    def summary(self) -> dict[str, int]:
        """Flat byte totals ``{"train_up_embeddings": bytes, ..., "total": bytes}``."""
        out = {f"{p}_{d}_{k}": n for (p, d, k), n in sorted(self.totals.items())}
        out["total"] = self.bytes()
        return out
