"""Which private dataset a cell reads: the set of its records' hashes.

A budget belongs to the people in a corpus, not to a file, an encoding or a catalogue name. A
dataset is therefore identified by the hash of each parsed record (:mod:`dpkit.data.records`):
its fingerprint is a digest of the sorted set, so a copy, a rename, a hard link, CRLF endings or
the same rows as JSON Lines share one fingerprint, and two sets that share records (a subset, a
catalogue alias) are linked by their overlap in the budget store. Every subsample of a corpus
has the corpus's record set (datasets built with :func:`dpkit.data.build_dataset` keep the hashes
of the whole corpus). A dataset whose records dpkit cannot tell is keyed by its registered name
(every run of it shares one budget: over-counts rather than under-counts).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpkit.data.records import RECORD_HASH, records_of


@dataclass(frozen=True)
class DatasetId:
    """A private dataset as the budget sees it: a name, a fingerprint and (when known) its
    record hashes."""

    name: str
    fingerprint: str
    basis: str
    records: frozenset[str] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def short(self) -> str:
        """``name [records:0123abcd]``: the name with the fingerprint's first 8 hex digits."""
        return short_name(self.name, self.fingerprint)


def short_name(name: str, fingerprint: str) -> str:
    """``name [records:0123abcd]``: ``name`` with the fingerprint's kind and first 8 digits."""
    kind, _, digest = fingerprint.partition(":")
    return f"{name} [{kind}:{digest[:8]}]"


def records_digest(records: frozenset[str]) -> str:
    """The fingerprint of a record set: sha256 of its sorted hashes."""
    h = hashlib.sha256()
    for record in sorted(records):
        h.update(record.encode() + b"\n")
    return "records:" + h.hexdigest()


def dataset_id(name: str, records: frozenset[str] | None, where: str = "") -> DatasetId:
    """The :class:`DatasetId` of a dataset called ``name`` with ``records`` (None: keyed by name)."""
    if records is None:
        return DatasetId(name, "name:" + name, "no record hashes known: every run of this "
                         "dataset name shares one budget")
    if not records:
        raise ValueError(f"dataset {name!r} has no records to identify it by")
    basis = f"{len(records):,} records ({RECORD_HASH}){', ' + where if where else ''}"
    return DatasetId(name, records_digest(records), basis, records)


def identify(loaded: Any, name: str, where: str = "") -> DatasetId:
    """The :class:`DatasetId` of a loaded dataset (what a component's ``load()`` returned)."""
    return dataset_id(name, records_of(loaded), where)


class DatasetIds:
    """:func:`identify` for cells' ``data`` refs, each (name, params) loaded and hashed once per
    process (the load is shared with the cells through the runner's component cache)."""

    def __init__(self, registry: Any):
        self.registry = registry
        self._seen: dict[str, DatasetId] = {}

    def __call__(self, data: dict[str, Any]) -> DatasetId:
        """The :class:`DatasetId` of a cell's ``data`` (``{"name": …, "params": {…}}``)."""
        import torch

        from dpkit.contract.context import load_component

        params = data.get("params", {}) or {}
        key = json.dumps([data["name"], params], sort_keys=True, default=str)
        if key not in self._seen:
            loaded = load_component(self.registry, "dataset", data["name"], params,
                                    torch.device("cpu"))
            name = data["name"] + (f":{Path(params['path']).name}" if params.get("path") else "")
            self._seen[key] = identify(loaded, name, _where(data["name"], params))
        return self._seen[key]


def _where(name: str, params: dict[str, Any]) -> str:
    path = params.get("path")
    return f"first read as {name}" + (f" from {path}" if path else "")
