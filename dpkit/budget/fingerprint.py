"""Which private dataset a cell reads: a content fingerprint that every subsample shares.

A budget belongs to the people in a corpus, not to one subsample of it: two cells reading 400 and
4,000 examples of Rotten Tomatoes may both hold any one critic's snippet, so both charge one
budget. The fingerprint therefore hashes where the data comes from, never the sampling params:

- a dataset that says it (:class:`FingerprintsContent`, e.g. one reading a local file hashes it);
- a catalogue entry with a pinned artifact: the artifact's sha256 and the file read inside it;
- anything else: the registered name alone, so every run of that dataset shares one budget
  (over-counts rather than under-counts).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class FingerprintsContent(Protocol):
    """A dataset that knows a content hash of the records it reads (its privacy unit's source)."""

    def content_fingerprint(self) -> tuple[str, str]:
        """(hex digest of the content, what was hashed — a path or an artifact, for people)."""
        ...


@dataclass(frozen=True)
class DatasetId:
    """A private dataset as the budget sees it: a registered name and a content fingerprint."""

    name: str
    fingerprint: str
    basis: str

    @property
    def short(self) -> str:
        """``name [sha256:0123abcd]``: the name with the fingerprint's first 8 hex digits."""
        return f"{self.name} [{self.fingerprint[:15]}]"


def _digest(*parts: str) -> str:
    return "sha256:" + hashlib.sha256("\0".join(parts).encode()).hexdigest()


def identify(component: Any, name: str) -> DatasetId:
    """The :class:`DatasetId` of a built dataset component registered as ``name``."""
    if isinstance(component, FingerprintsContent):
        digest, basis = component.content_fingerprint()
        return DatasetId(name, _digest("content", digest), basis)
    artifact: Any = getattr(type(component), "artifact", None)
    if artifact is not None and artifact.sha256:
        inner = str(getattr(type(component), "inner", None) or "")
        return DatasetId(name, _digest("artifact", artifact.sha256, name, inner),
                         f"{artifact.spec} (sha256 {artifact.sha256[:12]}…), {inner or name}")
    return DatasetId(name, _digest("name", name),
                     "no content hash known: every run of this dataset name shares one budget")


class DatasetIds:
    """:func:`identify` for cells' ``data`` refs, each (name, params) built and hashed once."""

    def __init__(self, registry: Any):
        self.registry = registry
        self._seen: dict[str, DatasetId] = {}

    def __call__(self, data: dict[str, Any]) -> DatasetId:
        """The :class:`DatasetId` of a cell's ``data`` (``{"name": …, "params": {…}}``)."""
        key = json.dumps(data, sort_keys=True, default=str)
        if key not in self._seen:
            component = self.registry.build("dataset", data["name"], data.get("params", {}))
            self._seen[key] = identify(component, data["name"])
        return self._seen[key]
