"""The budget store's history: an append-only log whose entries are hash-chained.

Every act on the store — a dataset first seen, a cap set, raised or lifted, a run's reservation,
each charge, a cell's end, a run's settlement — is one entry ``(seq, kind, body, prev, hash)``
with ``hash = sha256(prev ‖ seq ‖ kind ‖ time ‖ body)`` over the body's stored text and ``prev`` the hash
of the entry before (64 zeros for the first). The store's state is what replaying the log gives;
nothing else is trusted. An entry edited in place (a cap set to NULL, an ε lowered), deleted
(a charge removed) or inserted breaks the chain at that entry, and the meta row ``head`` (the last
seq and hash) catches entries deleted from the end. Whoever can write the database can still
rebuild a whole consistent chain: keep the head ``dpkit budget verify`` prints and pass it back as
``--expect-head`` to check that the history you saw is still there.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from dpkit.base.errors import BudgetStoreError
from dpkit.budget.sql import Run

GENESIS = "0" * 64
KINDS = ("dataset", "alias", "cap", "run", "charge", "end", "settle", "migrated")


class BrokenChainError(BudgetStoreError):
    """The store's history does not verify: an entry was edited, deleted or inserted by hand."""


@dataclass(frozen=True)
class Entry:
    """One verified log entry."""

    seq: int
    kind: str
    body: dict[str, Any]
    at: str
    hash: str


def entry_hash(prev: str, seq: int, kind: str, at: str, body_text: str) -> str:
    """The chain hash of one entry."""
    return hashlib.sha256(f"{prev}\n{seq}\n{kind}\n{at}\n{body_text}".encode()).hexdigest()


def read_log(run: Run, where: str) -> list[Entry]:
    """Every entry, oldest first, after checking the chain and the head (raises
    :class:`BrokenChainError` naming the first bad entry)."""
    rows = run("SELECT seq, kind, body, prev, hash, at FROM dpkit_budget_log ORDER BY seq")
    out, prev = [], GENESIS
    for index, (seq, kind, body, stored_prev, stored_hash, at) in enumerate(rows, start=1):
        why = None
        if seq != index:
            why = f"entry #{index} is missing (the next entry is #{seq}): entries were deleted"
        elif stored_prev != prev:
            why = (f"entry #{seq} ({kind}, {at}) does not follow entry #{seq - 1}: the entry before "
                   "it was edited, deleted or replaced")
        elif kind not in KINDS or entry_hash(prev, seq, kind, at or "", body or "") != stored_hash:
            why = f"entry #{seq} ({kind}, {at}) was edited: its hash does not match its content"
        if why is None:
            try:
                parsed = json.loads(body)
            except (TypeError, ValueError):
                why = f"entry #{seq} ({kind}, {at}) is not readable JSON"
        if why is not None:
            raise broken(where, why)
        out.append(Entry(seq, kind, parsed, at, stored_hash))
        prev = stored_hash
    head = run("SELECT value FROM dpkit_budget_meta WHERE key = 'head'")
    expected = head[0][0] if head else "0:" + GENESIS
    if expected != f"{len(out)}:{prev}":
        raise broken(where, f"the store's head says entry #{expected.split(':')[0]} is the last, "
                            f"but the log ends at #{len(out)}: entries were deleted from the end "
                            "or the head was edited")
    return out


def broken(where: str, why: str) -> BrokenChainError:
    """The error for a history that does not verify."""
    return BrokenChainError(f"the budget store {where} does not verify: {why}. dpkit will not "
                            "charge or report from a history it cannot trust: restore the store "
                            "from a backup (dpkit budget verify names every check)")


def append(run: Run, entries: list[Entry], kind: str, body: dict[str, Any]) -> Entry:
    """Append one entry after ``entries`` (the verified log of this write transaction)."""
    if kind not in KINDS:
        raise ValueError(f"unknown log entry kind {kind!r}")
    seq = len(entries) + 1
    prev = entries[-1].hash if entries else GENESIS
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    digest = entry_hash(prev, seq, kind, at, text)
    run("INSERT INTO dpkit_budget_log (seq, kind, body, prev, hash, at) VALUES (:s, :k, :b, :p, "
        ":h, :a)", {"s": seq, "k": kind, "b": text, "p": prev, "h": digest, "a": at})
    run("UPDATE dpkit_budget_meta SET value = :v WHERE key = 'head'", {"v": f"{seq}:{digest}"})
    entry = Entry(seq, kind, json.loads(text), at, digest)
    entries.append(entry)
    return entry
