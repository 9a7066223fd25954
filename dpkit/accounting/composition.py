"""The (ε, δ)-DP part of a ledger: exact grouping of equal events and one kept composition.

Equal events (field by field, arrays element by element) share a group; the accountant composed
from the groups is kept until the groups change, so any number of ε(δ) / δ(ε) queries — and the
ceiling check that preceded a spend — reuse one composition.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import dp_accounting

from dpkit.accounting import events as ev
from dpkit.accounting.guarantees import DpGuarantee
from dpkit.base.errors import AccountingError

Groups = list[tuple[Any, int]]


def _same_groups(kept: Groups, groups: Groups) -> bool:
    """True if two grouped-spend lists hold the very same event objects with the same counts."""
    return len(kept) == len(groups) and all(
        a is b and m == n for (a, m), (b, n) in zip(kept, groups))


class DpComposition:
    """Grouped (ε, δ)-DP spends under one accountant, relation and discretisation."""

    def __init__(self, accountant: str = "rdp", orders: Sequence[float] | None = None,
                 neighboring: str = "add_remove", discretization: float | None = None):
        self.accountant = ev.check_accountant(accountant)
        self.neighboring = ev.check_neighboring(neighboring)
        self.orders = list(orders) if orders is not None else None
        if self.orders is not None and self.accountant != "rdp":
            raise AccountingError("RDP orders were given with accountant='pld'; drop them")
        if discretization is not None and self.accountant != "pld":
            raise AccountingError("a PLD discretisation interval was given with accountant='rdp'; "
                                  "drop it or use accountant='pld'")
        self.discretization = (None if discretization is None
                               else ev.check_discretization(discretization))
        self._groups: dict[Hashable, list] = {}
        self._slot_of: dict[int, list] = {}  # id(guarantee) -> its group; spends keep it alive
        self._kept: tuple[Groups, dp_accounting.PrivacyAccountant] | None = None

    def __bool__(self) -> bool:
        return bool(self._groups)

    def check(self, guarantee: DpGuarantee, label: str) -> None:
        """Raise a clear AccountingError unless the accountant composes ``guarantee``'s event."""
        ev.check_supported(guarantee.event, self.accountant, self.orders, self.neighboring,
                           what=f"spend {label!r}")

    def add(self, guarantee: DpGuarantee, count: int) -> None:
        """Record ``count`` applications of ``guarantee`` in its group."""
        slot = self._slot_of.get(id(guarantee))
        if slot is None:
            slot = self._groups.setdefault(ev.event_key(guarantee.event), [guarantee.event, 0])
            self._slot_of[id(guarantee)] = slot
        slot[1] += count

    def groups(self, extra: tuple[DpGuarantee, int] | None = None) -> Groups:
        """The (event, count) groups, optionally with one more spend added."""
        groups = [(e, c) for e, c in self._groups.values()]
        if extra is not None:
            groups = ev.group_events(groups + [(extra[0].event, extra[1])])
        return groups

    def accountant_for(self, extra: tuple[DpGuarantee, int] | None = None
                       ) -> dp_accounting.PrivacyAccountant:
        """The accountant holding every group (plus ``extra``), composed once and kept."""
        groups = self.groups(extra)
        if self._kept is not None and _same_groups(self._kept[0], groups):
            return self._kept[1]
        acct = ev.composed_accountant(ev.composed_event(groups), self.accountant, self.orders,
                                      neighboring=self.neighboring,
                                      discretization=self.discretization)
        self._kept = (groups, acct)
        return acct
