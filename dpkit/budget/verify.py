"""``dpkit budget verify``: the whole history checked — the hash chain, its head, and every record
set against the fingerprint its dataset entry holds (see :mod:`dpkit.budget.chain`)."""

from __future__ import annotations

from typing import Any

from dpkit.budget import chain
from dpkit.budget.state import State, replay


def check_records(run: Any, state: State, where: str) -> None:
    """Raise unless every stored record set still hashes to its dataset's fingerprint."""
    from dpkit.budget.fingerprint import records_digest

    stored: dict[str, set[str]] = {}
    for dataset, record in run("SELECT dataset, record FROM dpkit_budget_records"):
        stored.setdefault(dataset, set()).add(record)
    for fp, meta in state.datasets.items():
        if not fp.startswith("records:"):
            continue
        got = frozenset(stored.get(fp, ()))
        if len(got) != meta["records"] or records_digest(got) != fp:
            raise chain.broken(where, f"the stored records of {meta['name']} ({fp[:16]}) were "
                                      f"edited: {len(got)} of {meta['records']} left, or changed")


def verify_store(store: Any, expect_head: str | None = None) -> dict[str, Any]:
    """Counts and the head of a store whose whole history verifies (raises naming what does not);
    ``expect_head`` (``SEQ:HASH`` from an earlier verify) must still be in the history."""
    with store.backend.transaction(write=False) as run:
        entries = chain.read_log(run, store.where)
        state = replay(entries)
        check_records(run, state, store.where)
    head = f"{len(entries)}:{entries[-1].hash if entries else chain.GENESIS}"
    if expect_head and not _extends(entries, expect_head):
        raise chain.broken(store.where, f"the history no longer holds the head {expect_head} you "
                                        "kept: it was rewritten or cut")
    return {"entries": len(entries), "head": head, "datasets": len(state.datasets),
            "runs": len(state.runs), "caps": len(state.caps)}


def _extends(entries: list, head: str) -> bool:
    seq, _, digest = head.partition(":")
    return seq.isdigit() and 0 < int(seq) <= len(entries) and entries[int(seq) - 1].hash == digest
