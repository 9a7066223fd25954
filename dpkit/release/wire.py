"""The one release path: every tensor a defense sends to the untrusted side crosses a :class:`Wire`.

A defense declares its :class:`Release`\\ s before anything is sent (each becomes one ledger spend,
an uncovered one a :class:`~dpkit.accounting.NoGuarantee` naming the tensor), then sends tensors
by release name. The wire meters bytes for every defense, keeps what the server observed for the
attacks' view, and at :meth:`Wire.close` records an ∞ entry for anything that crossed beyond its
declaration — the ledger never under-states.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import torch

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.base.errors import AccountingError
from dpkit.release.declaration import UNITS, Release
from dpkit.release.provenance import Provenance, captured_tensors, tensors_in
from dpkit.release.view import ServerView

if TYPE_CHECKING:
    from dpkit.accounting.ledger import Ledger, Spend

UP = "up"
DOWN = "down"


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
    releases: dict[str, Release] = field(default_factory=dict)
    spends: dict[str, Spend] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    derived: dict[str, Provenance] = field(default_factory=dict)
    declared_by: set[int] = field(default_factory=set)
    _observed: dict[str, Any] = field(default_factory=dict)
    _seen: dict[str, Counter[bytes]] = field(default_factory=dict)
    _keep: dict[str, int] = field(default_factory=dict)
    _parts: dict[str, list[torch.Tensor]] = field(default_factory=lambda: defaultdict(list))
    _closed: bool = False

    @property
    def observed(self) -> Mapping[str, Any]:
        """What the server observed (read-only: only :meth:`send`, :meth:`reply` and
        :meth:`derive` add to it)."""
        return MappingProxyType(self._observed)

    # ------------------------------------------------------------------ declaring
    def declare(self, releases: Iterable[Release]) -> list[Spend]:
        """Record each release on the ledger (one spend each) before anything is sent.

        An uncovered release records its ∞ entry here, whatever its count.
        """
        recorded = []
        for release in releases:
            if release.name in self.releases:
                raise AccountingError(f"release {release.name!r} is declared twice; give each "
                                      "tensor that crosses the wire one release")
            if release.covered_by is not None and release.covered_by not in self.releases:
                raise AccountingError(f"release {release.name!r} is covered_by "
                                      f"{release.covered_by!r}, which is not declared before it")
            self.releases[release.name] = release
            if release.guarantee is not None and (release.count > 0 or release.is_uncovered):
                spend = self.ledger.spend(release.guarantee, release.label, max(release.count, 1))
                self.spends[release.name] = spend
                recorded.append(spend)
        return recorded

    # -------------------------------------------------------------------- sending
    def send(self, name: str, tensor: torch.Tensor, direction: str = UP, *,
             units: int | None = None, rows: torch.Tensor | None = None,
             groups: Sequence[int] | torch.Tensor | None = None,
             observe: str | None = None, observe_rows: torch.Tensor | None = None,
             requires_grad: bool = False) -> torch.Tensor:
        """Send ``tensor`` from the client to the server; returns the server's detached copy.

        Needs a declared release named ``name`` (an undeclared one is recorded as ε = ∞). The
        wire counts its units by the release's unit (:mod:`dpkit.release.declaration`) from
        ``tensor[rows]`` when a boolean ``rows`` mask marks the real rows (e.g. non-padding),
        with ``groups`` for group-counted releases; ``units``, if given, must agree with that
        count. ``observe`` keeps the sent rows (``tensor[rows]``, or ``tensor[observe_rows]`` to
        keep fewer) under that view key for the attacks. The server's answers go back through
        :meth:`reply`.
        """
        if direction != UP:
            if direction == DOWN:
                raise AccountingError(f"wire.send({name!r}, …) is the client's upload; send the "
                                      f"server's answer with wire.reply({name!r}, …)")
            raise ValueError(f"wire direction must be {UP!r}, got {direction!r}")
        self._check_open(name)
        self.totals[(self.phase, UP, name)] += tensor_bytes(tensor)
        real = tensor[rows.bool()] if rows is not None else tensor
        self._count(name, real, units, groups)
        if observe is not None:
            shown = tensor[observe_rows.bool()] if observe_rows is not None else real
            self._observe(observe, shown.detach())
        received = tensor.detach()
        return received.requires_grad_(True) if requires_grad else received

    def reply(self, name: str, tensor: torch.Tensor, *, observe: str | None = None,
              requires_grad: bool = False) -> torch.Tensor:
        """Send the server's ``tensor`` down to the client (metered, not counted); returns the
        client's detached copy. ``observe`` keeps it in the view (the server knows its answers)."""
        self._check_open(name)
        self.totals[(self.phase, DOWN, name)] += tensor_bytes(tensor)
        if observe is not None:
            self._observe(observe, tensor.detach())
        received = tensor.detach()
        return received.requires_grad_(True) if requires_grad else received

    def _check_open(self, name: str) -> None:
        if self._closed:
            raise AccountingError(f"wire is closed; {name!r} was sent after the run ended")

    def _count(self, name: str, real: torch.Tensor, units: int | None,
               groups: Sequence[int] | torch.Tensor | None) -> None:
        release = self.releases.get(name)
        if release is None:
            release = Release.uncovered(name, "sent to the server without a declared release")
            self.declare([release])
        measured = release.measure(real, groups)
        if units is not None and int(units) != measured:
            raise AccountingError(
                f"wire.send({name!r}): units={units} but the wire counts {measured} "
                f"{release.unit}(s) in what was sent; the wire counts units itself — drop units= "
                f"and declare the release's unit ({', '.join(UNITS)}) instead")
        if release.reusable:
            measured = self._new_rows(name, real)
        self.units[name] += measured

    def _new_rows(self, name: str, real: torch.Tensor) -> int:
        """Rows of ``real`` beyond the copies of each row content this release already carried."""
        if not real.ndim:
            real = real.reshape(1)
        now = Counter(_row_digests(real))
        seen = self._seen.setdefault(name, Counter())
        new = sum(max(0, n - seen[d]) for d, n in now.items())
        for digest, n in now.items():
            seen[digest] = max(seen[digest], n)
        return new

    def _observe(self, key: str, rows: torch.Tensor) -> None:
        cap = self._keep.get(key)
        have = sum(p.shape[0] if p.ndim else 1 for p in self._parts[key])
        if cap is not None and have >= cap:
            return
        self._parts[key].append(rows if cap is None or not rows.ndim else rows[:cap - have])
        parts = self._parts[key]
        self._observed[key] = torch.cat(parts) if parts[0].ndim else parts[-1]

    def keep(self, key: str, rows: int | None) -> None:
        """Keep at most ``rows`` rows of what is observed under ``key`` (None: keep all)."""
        if rows is None:
            self._keep.pop(key, None)
        else:
            self._keep[key] = int(rows)

    def derive(self, key: str, fn: Callable[..., Any], *sources: str,
               server_state: Mapping[str, Any] | None = None) -> Any:
        """A server-side computation on observed tensors only, added to the view under ``key``.

        ``fn`` receives the observed ``sources``. A tensor it captures (closure, defaults) that
        did not cross the wire is recorded as ε = ∞ naming ``key``, unless it is listed in
        ``server_state`` — what the server computed itself from what crossed (e.g. the model it
        fine-tuned on the uploads), which the provenance records by name.
        """
        missing = [s for s in sources if s not in self._observed]
        if missing:
            raise AccountingError(f"derive {key!r}: {missing} never crossed the wire; the server "
                                  f"can only compute from what it observed ({sorted(self._observed)})")
        vouched = {id(t) for v in (server_state or {}).values() for t in tensors_in(v)}
        crossed = {id(t) for v in self._observed.values() for t in tensors_in(v)}
        foreign = [t for t in captured_tensors(fn) if id(t) not in vouched | crossed]
        provenance = Provenance(tuple(sources), getattr(fn, "__qualname__", repr(fn)),
                                tuple(sorted(server_state or {})), len(foreign))
        if foreign:
            self.ledger.spend(NoGuarantee(
                f"server view {key!r} was derived by {provenance.function}, which captured "
                f"{len(foreign)} tensor(s) that never crossed the wire"), f"view {key} (derived)")
        value = fn(*(self._observed[s] for s in sources))
        self._observed[key] = value
        self.derived[key] = provenance
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
                      if not _same(value, self._observed.get(key, _MISSING)))

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
