"""The privacy ledger: records every spend with a label, composes per notion, answers queries.

State lives here; the math lives in :mod:`dpkit.accounting.events` (dp-accounting bridge) and
:mod:`dpkit.accounting.rules` (metric DP and (k, ε)-anonymity), in the style of Opacus's split
between accountant objects and analysis functions.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from dpkit.accounting import rules
from dpkit.accounting.ceiling import Ceiling, Usage
from dpkit.accounting.composition import DpComposition
from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.metric_queries import MetricDpQueries
from dpkit.accounting.report import ledger_table
from dpkit.accounting.serialize import describe, guarantee_from_dict, guarantee_to_dict
from dpkit.base.errors import AccountingError

FORMAT = "dpkit-ledger/1"
_KINDS = (DpGuarantee, MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee)


def _as_count(count: Any, label: str) -> int:
    """An int from a numpy / torch integer; bools, floats and the rest are refused."""
    try:
        if isinstance(count, bool):
            raise TypeError
        return operator.index(count)
    except TypeError:
        raise AccountingError(f"spend {label!r}: count must be an integer ≥ 1, got {count!r}") from None


class Spend(NamedTuple):
    """One recorded spend: a guarantee, what it was for, and how many times it was applied."""

    guarantee: Guarantee
    label: str
    count: int = 1


Guard = Callable[[Spend], None]
"""Called with every spend before it is recorded; raises (e.g. BudgetExceededError) to refuse it."""

_ACTIVE_GUARD: ContextVar[Guard | None] = ContextVar("dpkit_ledger_guard", default=None)


@contextmanager
def guarding(guard: Guard | None) -> Iterator[None]:
    """Within the block, :func:`active_guard` is ``guard`` (the runner's budget guard of a cell)."""
    token = _ACTIVE_GUARD.set(guard)
    try:
        yield
    finally:
        _ACTIVE_GUARD.reset(token)


def active_guard() -> Guard | None:
    """The guard set by the innermost :func:`guarding` block, or None."""
    return _ACTIVE_GUARD.get()


class Ledger(MetricDpQueries):
    """Records privacy spends and composes them: (ε, δ)-DP, metric DP and (k, ε)-anonymity.

    ``delta`` is the δ at which :meth:`epsilon` is reported, ``accountant`` the dp-accounting
    accountant (``"rdp"`` default, or ``"pld"``), ``ceiling`` an optional budget (a float caps
    both ε's, or a mapping with ``epsilon`` / ``eta`` / ``anonymity_epsilon``); a spend over it
    raises :class:`~dpkit.base.errors.BudgetExceededError` and is not recorded. ``orders`` overrides
    the RDP orders (dp-accounting's default grid otherwise), ``pld_discretization`` the PLD
    value-discretisation interval (1e-4). ``neighboring`` is the relation (ε, δ) is stated in:
    ``"add_remove"`` (one record added or removed, default) or ``"replace_one"``. ``guard`` (also
    settable as ``ledger.guard``) is called with each :class:`Spend` after the ceiling check and
    before it is recorded; if it raises, nothing is recorded (the runner's guard charges the
    persistent budget store, write-ahead, and refuses a spend past a dataset's cap).

    The settings are fixed when the ledger is built: ``delta_target``, ``accountant``,
    ``neighboring``, ``orders``, ``pld_discretization`` and ``ceiling`` cannot be reassigned, and
    a guard, once set, cannot be replaced or removed — a plug-in holding the cell's ledger
    (``ctx.ledger``) cannot report its ε at another δ, lift the cap or stop the store's charge.
    """

    def __init__(self, delta: float = 1e-5, accountant: str = "rdp",
                 ceiling: float | Mapping[str, float] | Ceiling | None = None,
                 orders: Sequence[float] | None = None, neighboring: str = "add_remove",
                 pld_discretization: float | None = None, guard: Guard | None = None):
        if not 0 <= delta < 1:
            raise AccountingError(f"ledger delta must lie in [0, 1), got {delta!r}")
        self._delta = float(delta)
        self._dp = DpComposition(accountant, orders, neighboring, pld_discretization)
        self._ceiling = Ceiling.coerce(ceiling)
        self._spends: list[Spend] = []
        self._metric: dict[MetricDpGuarantee, int] = {}
        self._metric_passes: dict[MetricDpGuarantee, int] = {}
        self._kanon: dict[KAnonymityGuarantee, int] = {}
        self._none: dict[str, int] = {}
        self._cache: dict[tuple, float] = {}
        self._guard: Guard | None = guard

    # ------------------------------------------------------------------ settings
    @property
    def delta_target(self) -> float:
        """The δ at which :meth:`epsilon` reports (fixed)."""
        return self._delta

    @property
    def accountant(self) -> str:
        """The dp-accounting accountant, ``"rdp"`` or ``"pld"`` (fixed)."""
        return self._dp.accountant

    @property
    def neighboring(self) -> str:
        """The neighbouring relation (ε, δ) is stated in (fixed)."""
        return self._dp.neighboring

    @property
    def orders(self) -> list[float] | None:
        """The RDP orders given (None: dp-accounting's default grid; fixed)."""
        return None if self._dp.orders is None else list(self._dp.orders)

    @property
    def pld_discretization(self) -> float | None:
        """The PLD value-discretisation interval given (fixed)."""
        return self._dp.discretization

    @property
    def ceiling(self) -> Ceiling | None:
        """The budget every spend is checked against (fixed)."""
        return self._ceiling

    @property
    def guard(self) -> Guard | None:
        """Called with each spend before it is recorded (see the class docstring)."""
        return self._guard

    @guard.setter
    def guard(self, guard: Guard | None) -> None:
        if self._guard is not None and guard is not self._guard:
            raise AccountingError("this ledger's guard is set (the runner's budget guard); it "
                                  "cannot be replaced or removed")
        self._guard = guard

    # ----------------------------------------------------------------- recording
    def spend(self, guarantee: Guarantee, label: str, count: int = 1) -> Spend:
        """Record ``count`` applications of ``guarantee``; checks the ceiling, then the guard."""
        if type(guarantee) not in _KINDS and not isinstance(guarantee, _KINDS):
            raise AccountingError(f"spend {label!r}: {guarantee!r} is not a dpkit guarantee; wrap "
                                  "a DpEvent as DpGuarantee(event)")
        if type(count) is not int:
            count = _as_count(count, label)
        if count < 1:
            raise AccountingError(f"spend {label!r}: count must be an integer ≥ 1, got {count!r}")
        if type(label) is not str or not label:
            raise AccountingError(f"a spend needs a non-empty label, got {label!r}")
        if isinstance(guarantee, DpGuarantee):
            self._dp.check(guarantee, label)
        if self.ceiling is not None:
            self._check_ceiling(self.ceiling, guarantee, label, count)
        spend = Spend(guarantee, label, count)
        if self.guard is not None:
            self.guard(spend)
        return self._record(spend)

    def _check_ceiling(self, ceiling: Ceiling, g: Guarantee, label: str, count: int) -> None:
        asked = f"spend {label!r} ({describe(g)}, ×{count})"
        if isinstance(g, NoGuarantee):
            ceiling.refuse_unbounded(asked)
        cap = ceiling.governs(g)
        if cap == "epsilon":
            after = self._dp.epsilon(self.delta_target, extra=(g, count))
            usage = Usage(cap, self.epsilon(), after,
                          f"would bring ε to {after:.6g} at δ={self.delta_target:g}")
        elif cap == "eta":
            now = self.eta_totals().get(rules.metric_key(g), 0.0)
            after = math.fsum([now, g.eta * count])
            usage = Usage(cap, now, after, f"would bring η ({g.metric}, {g.space or 'any space'}) "
                                           f"to {after:.6g}")
        elif cap == "anonymity_epsilon":
            k = self.k_anonymity()
            now = k.epsilon if k is not None else 0.0
            after = math.fsum([now, g.epsilon * count])
            usage = Usage(cap, now, after, f"would bring the anonymity ε to {after:.6g}")
        else:
            return
        ceiling.check(asked, usage)

    def _record(self, spend: Spend) -> Spend:
        g, n = spend.guarantee, spend.count
        if isinstance(g, DpGuarantee):
            self._dp.add(g, n)
        elif isinstance(g, MetricDpGuarantee):
            self._metric[g] = self._metric.get(g, 0) + n
            self._metric_passes[g] = self._metric_passes.get(g, 0) + 1
        elif isinstance(g, KAnonymityGuarantee):
            self._kanon[g] = self._kanon.get(g, 0) + n
        else:
            self._none[g.reason] = self._none.get(g.reason, 0) + n
        self._spends.append(spend)
        self._cache.clear()
        return spend

    @property
    def spends(self) -> tuple[Spend, ...]:
        """Every recorded spend, in order."""
        return tuple(self._spends)

    def __len__(self) -> int:
        return len(self._spends)

    # ------------------------------------------------------------ (ε, δ)-DP
    def dp_groups(self, extra: tuple[DpGuarantee, int] | None = None) -> list[tuple[Any, int]]:
        """The (event, count) groups of DP spends, optionally with one more spend added."""
        return self._dp.groups(extra)

    def dp_event(self):
        """All DP spends as one dp-accounting event (grouped ``SelfComposedDpEvent``s)."""
        from dpkit.accounting import events as ev

        return ev.composed_event(self.dp_groups())

    def composed_accountant(self, extra: tuple[DpGuarantee, int] | None = None,
                            accountant: str | None = None):
        """The dp-accounting accountant holding every DP spend (plus ``extra``), kept for reuse.

        Composition runs once per set of spends; any number of ε(δ) / δ(ε) queries reuse it,
        and a ceiling check's accountant is reused once its spend is recorded. ``accountant``
        picks RDP or PLD (default: the ledger's).
        """
        return self._dp.accountant_for(extra, accountant)

    @property
    def no_guarantee_reasons(self) -> list[str]:
        """Reasons of every NoGuarantee spend (each makes ε = ∞)."""
        return list(self._none)

    def epsilon(self, delta: float | None = None, accountant: str | None = None) -> float:
        """ε of all DP spends at ``delta`` (the ledger's δ by default); ∞ after a NoGuarantee.

        The tightest bound known: the smaller of the accountant's (``accountant``, default the
        ledger's; ``"rdp"`` or ``"pld"``) and basic composition's for spends with a stated ε.
        """
        if self._none:
            return math.inf
        if not self._dp:
            return 0.0
        d = self.delta_target if delta is None else float(delta)
        if not 0 <= d < 1:
            raise AccountingError(f"delta must lie in [0, 1), got {delta!r}")
        key = ("eps", d, accountant or self.accountant)
        if key not in self._cache:
            self._cache[key] = self._dp.epsilon(d, accountant=accountant)
        return self._cache[key]

    def delta(self, epsilon: float, accountant: str | None = None) -> float:
        """δ of all DP spends at ``epsilon``; 1 after a NoGuarantee, 0 with no DP spends.

        The smaller of the accountant's (``accountant``, default the ledger's) and basic
        composition's bound, like :meth:`epsilon`.
        """
        if self._none:
            return 1.0
        if not self._dp:
            return 0.0
        if not epsilon >= 0:
            raise AccountingError(f"epsilon must be ≥ 0, got {epsilon!r}")
        return self._dp.delta(float(epsilon), accountant=accountant)

    # ------------------------------------------------------ (k, ε)-anonymity
    def k_anonymity(self) -> rules.KAnonymityTotal | None:
        """Composed (k, ε)-anonymity (min k, summed ε), or None without such spends."""
        return rules.compose_k_anonymity(self._kanon.items())

    # --------------------------------------------------------------- reports
    def remaining(self) -> dict[str, float]:
        """What the ceiling still allows: ``epsilon``, ``eta``, ``anonymity_epsilon`` (∞ if uncapped)."""
        etas = self.eta_totals().values()
        k = self.k_anonymity()
        used = {"epsilon": self.epsilon(), "eta": max(etas, default=0.0),
                "anonymity_epsilon": k.epsilon if k is not None else 0.0}
        return (self.ceiling or Ceiling()).remaining(used)

    def summary(self) -> dict[str, float]:
        """Flat numbers for a results row; only the keys that apply (ε = ∞ after a NoGuarantee)."""
        out: dict[str, float] = {}
        if self._dp or self._none:
            out["epsilon"] = self.epsilon()
            out["delta"] = self.delta_target
        out.update(self._metric_summary())
        k = self.k_anonymity()
        if k is not None:
            out.update(k_achieved=float(k.k_achieved), k_requested=float(k.k_requested),
                       share_below_k=k.share_below_k, anonymity_epsilon=k.epsilon)
        if self._none:
            out["no_guarantee_spends"] = float(sum(self._none.values()))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record of the ledger (settings, spends, summary; ∞ written as ``"inf"``)."""
        return {
            "format": FORMAT, "delta": self.delta_target, "accountant": self.accountant,
            "neighboring": self.neighboring, "pld_discretization": self.pld_discretization,
            "orders": self.orders, "ceiling": self.ceiling.to_dict() if self.ceiling else None,
            "spends": [{"label": s.label, "count": s.count,
                        "guarantee": guarantee_to_dict(s.guarantee)} for s in self._spends],
            "summary": {k: (v if math.isfinite(v) else "inf") for k, v in self.summary().items()},
            "no_guarantee_reasons": self.no_guarantee_reasons,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ledger:
        """Rebuild a ledger written by :meth:`to_dict` (spends replayed without ceiling checks)."""
        if data.get("format") != FORMAT:
            raise AccountingError(f"not a dpkit ledger record: format={data.get('format')!r}, "
                                  f"expected {FORMAT!r}")
        ledger = cls(delta=data["delta"], accountant=data["accountant"],
                     ceiling=data.get("ceiling"), orders=data.get("orders"),
                     neighboring=data.get("neighboring", "add_remove"),
                     pld_discretization=data.get("pld_discretization"))
        for item in data["spends"]:
            ledger._record(Spend(guarantee_from_dict(item["guarantee"]), item["label"],
                                 int(item["count"])))
        return ledger

    def table(self) -> str:
        """A printable table of spends followed by the per-notion totals."""
        return ledger_table(self)
