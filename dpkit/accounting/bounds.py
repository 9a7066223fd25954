"""Basic composition of the spends that state their own (ε, δ): a bound the accountants can miss.

Every RDP→(ε, δ) conversion adds a term (log(1/δ)/(α − 1) at the best order α), so 32 pure
releases of ε = 4 come out of RDP at 128.003, above the 128 basic composition proves. Basic
composition (ε's and δ's add, adaptively too: Dwork, McSherry, Nissim and Smith, TCC 2006; Dwork
and Roth, "The Algorithmic Foundations of Differential Privacy", Theorem 3.16) applies to every
event with a stated (ε, δ): :class:`~dpkit.accounting.pure.PureDpEvent`,
:class:`~dpkit.accounting.pure.ApproxDpEvent`, ``LaplaceDpEvent(b)`` (ε = 1/b) and
``RandomizedResponseDpEvent(p, k)`` (ε = log(1 + k(1 − p)/p)). When every spend states one,
the ledger reports min(accountant's ε, Σεᵢ) at any δ ≥ Σδᵢ. A mix gains nothing from splitting
under RDP: each stated event's Rényi curve is at most its ε at every order, so the joint
conversion is never above Σεᵢ + ε_rest(δ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import dp_accounting

from dpkit.accounting.pure import NEIGHBORING, ApproxDpEvent, PureDpEvent, effective_epsilon

Groups = list[tuple[Any, int]]


class Split(NamedTuple):
    """Spends split into a stated part (Σε, Σδ) and the rest, left to the accountant."""

    epsilon: float
    delta: float
    rest: Groups


def stated_privacy(event: Any, neighboring: str) -> tuple[float, float] | None:
    """(ε, δ) that ``event`` states under ``neighboring``, or None when it states none."""
    if isinstance(event, (PureDpEvent, ApproxDpEvent)):
        eps = effective_epsilon(event, NEIGHBORING[neighboring])
        if eps is None:
            return None
        return eps, (event.delta if isinstance(event, ApproxDpEvent) else 0.0)
    if isinstance(event, dp_accounting.LaplaceDpEvent) and event.noise_multiplier > 0:
        scale = 2.0 if neighboring == "replace_one" else 1.0  # a replacement: sensitivity 2
        return scale / event.noise_multiplier, 0.0
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent) and neighboring != "add_remove":
        p, k = event.noise_parameter, event.num_buckets
        if p > 0 and k >= 1:
            return (0.0 if k == 1 or p == 1 else math.log1p(k * (1 - p) / p)), 0.0
    return None


def _flatten(groups: Sequence[tuple[Any, int]]) -> Groups:
    """Groups with ``SelfComposedDpEvent`` and ``ComposedDpEvent`` opened up (counts multiplied)."""
    out: Groups = []
    for event, count in groups:
        if isinstance(event, dp_accounting.SelfComposedDpEvent):
            out += _flatten([(event.event, count * event.count)])
        elif isinstance(event, dp_accounting.ComposedDpEvent):
            out += _flatten([(e, count) for e in event.events])
        else:
            out.append((event, count))
    return out


def split_stated(groups: Sequence[tuple[Any, int]], neighboring: str) -> Split:
    """Sum the stated (ε, δ) of every spend that has one; the others are returned as ``rest``."""
    eps: list[float] = []
    delta: list[float] = []
    rest: Groups = []
    for event, count in _flatten(groups):
        stated = stated_privacy(event, neighboring)
        if stated is None:
            rest.append((event, count))
        else:
            eps.append(count * stated[0])
            delta.append(count * stated[1])
    return Split(math.fsum(eps), math.fsum(delta), rest)
