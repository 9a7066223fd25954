"""Many ε(δ) / δ(ε) queries on one ledger: composition runs once, as with raw dp-accounting.

Run ``python -m bench.ledger_queries``. Two mixture-of-Gaussians spends (1,001 components each)
on a PLD ledger, then 5 ε(δ) and 5 δ(ε) queries; prints the ledger's time over dp-accounting's
(compose once, query ten times). Before the ledger kept its accountant, every new query
recomposed: the ratio was about the number of distinct queries.
"""

from __future__ import annotations

import time

import dp_accounting
import numpy as np
from dp_accounting.dp_event import MixtureOfGaussiansDpEvent
from dp_accounting.pld import PLDAccountant

from dpkit.accounting import DpGuarantee, Ledger

DISCRETIZATION = 1e-2
DELTAS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
EPSILONS = (1.0, 2.0, 3.0, 4.0, 5.0)


def events() -> list[MixtureOfGaussiansDpEvent]:
    """Two mixture-of-Gaussians events that differ only mid-array."""
    base = np.zeros(1001)
    base[-1] = 1.0
    other = base.copy()
    other[500] = 3.0
    probs = np.full(1001, 1 / 1001)
    return [MixtureOfGaussiansDpEvent(1.0, base, probs), MixtureOfGaussiansDpEvent(1.0, other, probs)]


def raw() -> float:
    """dp-accounting: compose once, query ten times."""
    start = time.perf_counter()
    acct = PLDAccountant(value_discretization_interval=DISCRETIZATION)
    acct.compose(dp_accounting.ComposedDpEvent(events()))
    for d in DELTAS:
        acct.get_epsilon(d)
    for e in EPSILONS:
        acct.get_delta(e)
    return time.perf_counter() - start


def ledger() -> float:
    """The ledger: two spends, the same ten queries."""
    start = time.perf_counter()
    book = Ledger(accountant="pld", pld_discretization=DISCRETIZATION)
    for i, event in enumerate(events()):
        book.spend(DpGuarantee(event), f"mixture {i}")
    for d in DELTAS:
        book.epsilon(d)
    for e in EPSILONS:
        book.delta(e)
    return time.perf_counter() - start


if __name__ == "__main__":
    t_raw, t_ledger = raw(), ledger()
    print(f"dp-accounting {t_raw:.2f} s, ledger {t_ledger:.2f} s: ratio {t_ledger / t_raw:.2f} "
          f"(10 queries; recomposing per query would be about 10)")
