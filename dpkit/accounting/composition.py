"""The (ε, δ)-DP part of a ledger: exact grouping of equal events and one kept composition.

Equal events (field by field, arrays element by element) share a group; the accountant composed
from the groups is kept until the groups change, so any number of ε(δ) / δ(ε) queries — and the
ceiling check that preceded a spend — reuse one composition. Either accountant answers (each
keeps its own composition), and every answer is the smaller of the accountant's bound and basic
composition's (:mod:`dpkit.accounting.bounds`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from typing import TYPE_CHECKING

from dpkit.accounting import settings
from dpkit.accounting.guarantees import DpGuarantee
from dpkit.base.errors import AccountingError

if TYPE_CHECKING:
    import dp_accounting

Groups = list[tuple[Any, int]]


def _same_groups(kept: Groups, groups: Groups) -> bool:
    """True if two grouped-spend lists hold the very same event objects with the same counts."""
    return len(kept) == len(groups) and all(
        a is b and m == n for (a, m), (b, n) in zip(kept, groups))


class DpComposition:
    """Grouped (ε, δ)-DP spends under one accountant, relation and discretisation."""

    def __init__(self, accountant: str = "rdp", orders: Sequence[float] | None = None,
                 neighboring: str = "add_remove", discretization: float | None = None):
        self.accountant = settings.check_accountant(accountant)
        self.neighboring = settings.check_neighboring(neighboring)
        self.orders = list(orders) if orders is not None else None
        if self.orders is not None and self.accountant != "rdp":
            raise AccountingError("RDP orders were given with accountant='pld'; drop them")
        if discretization is not None and self.accountant != "pld":
            raise AccountingError("a PLD discretisation interval was given with accountant='rdp'; "
                                  "drop it or use accountant='pld'")
        self.discretization = (None if discretization is None
                               else settings.check_discretization(discretization))
        self._groups: dict[Hashable, list] = {}
        self._slot_of: dict[int, list] = {}  # id(guarantee) -> its group; spends keep it alive
        self._kept: dict[str, tuple[Groups, dp_accounting.PrivacyAccountant]] = {}

    def __bool__(self) -> bool:
        return bool(self._groups)

    def check(self, guarantee: DpGuarantee, label: str) -> None:
        """Raise a clear AccountingError unless the accountant composes ``guarantee``'s event."""
        from dpkit.accounting import events as ev

        ev.check_supported(guarantee.event, self.accountant, self.orders, self.neighboring,
                           what=f"spend {label!r}")

    def add(self, guarantee: DpGuarantee, count: int) -> None:
        """Record ``count`` applications of ``guarantee`` in its group."""
        from dpkit.accounting import events as ev

        slot = self._slot_of.get(id(guarantee))
        if slot is None:
            slot = self._groups.setdefault(ev.event_key(guarantee.event), [guarantee.event, 0])
            self._slot_of[id(guarantee)] = slot
        slot[1] += count

    def groups(self, extra: tuple[DpGuarantee, int] | None = None) -> Groups:
        """The (event, count) groups, optionally with one more spend added."""
        groups = [(e, c) for e, c in self._groups.values()]
        if extra is not None:
            from dpkit.accounting import events as ev

            groups = ev.group_events(groups + [(extra[0].event, extra[1])])
        return groups

    def _settings(self, accountant: str) -> dict[str, Any]:
        """Orders / discretisation for ``accountant``: the ledger's own, else dp-accounting's."""
        own = accountant == self.accountant
        return {"orders": self.orders if own else None,
                "discretization": self.discretization if own and accountant == "pld" else None}

    def accountant_for(self, extra: tuple[DpGuarantee, int] | None = None,
                       accountant: str | None = None) -> dp_accounting.PrivacyAccountant:
        """The accountant holding every group (plus ``extra``), composed once and kept.

        ``accountant`` (``"rdp"`` / ``"pld"``, default the ledger's) picks which one; each keeps
        its own composition.
        """
        return self._composed(self.groups(extra), settings.check_accountant(accountant or self.accountant))

    def _composed(self, groups: Groups, name: str) -> dp_accounting.PrivacyAccountant:
        from dpkit.accounting import events as ev  # dp-accounting: imported on the first DP query

        kept = self._kept.get(name)
        if kept is not None and _same_groups(kept[0], groups):
            return kept[1]
        acct = ev.composed_accountant(ev.composed_event(groups), name, neighboring=self.neighboring,
                                      **self._settings(name))
        self._kept[name] = (groups, acct)
        return acct

    def epsilon(self, delta: float, extra: tuple[DpGuarantee, int] | None = None,
                accountant: str | None = None) -> float:
        """The smallest ε at ``delta`` of the accountant's and basic composition's bounds."""
        from dpkit.accounting import bounds

        name = settings.check_accountant(accountant or self.accountant)
        groups = self.groups(extra)
        best = float(self._composed(groups, name).get_epsilon(delta))
        split = bounds.split_stated(groups, self.neighboring)
        if not split.rest and split.delta <= delta:
            best = min(best, split.epsilon)
        return best

    def delta(self, epsilon: float, accountant: str | None = None) -> float:
        """The smallest δ at ``epsilon`` of the accountant's and basic composition's bounds."""
        from dpkit.accounting import bounds

        name = settings.check_accountant(accountant or self.accountant)
        groups = self.groups()
        best = float(self._composed(groups, name).get_delta(epsilon))
        split = bounds.split_stated(groups, self.neighboring)
        if not split.rest and split.epsilon <= epsilon:
            best = min(best, split.delta)
        return min(best, 1.0)
