"""What a server process may load: the spec's public model and the public datasets its cell approved.

A server names the public datasets it needs (:meth:`dpkit.Server.public_data`); the runner checks
them against the cell's private dataset *by records* before the server starts
(:func:`overlapping_records`) and passes only the approved ones, so a renamed copy, another
catalogue name or a superset of the private corpus never reaches the server.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from dpkit.base.cache import cache_root
from dpkit.base.errors import DpkitError
from dpkit.contract.context import derive_seed, load_component


class PrivateDataError(DpkitError):
    """A server asked for data it may not have: the cell's private records."""


def ref_key(name: str, params: dict | None) -> str:
    """A canonical key of a component reference (name and params)."""
    return json.dumps([name, params or {}], sort_keys=True, default=str)


def record_hashes(dataset: Any) -> set[bytes]:
    """A digest of every record (text, whitespace-normalised) of every split of ``dataset``."""
    out = set()
    for split in getattr(dataset, "splits", {}).values():
        for text in getattr(split, "texts", ()):
            out.add(hashlib.blake2b(" ".join(str(text).split()).encode(), digest_size=16).digest())
    return out


def overlapping_records(private: Any, public: Any) -> int:
    """How many records of ``public`` are records of ``private``."""
    return len(record_hashes(private) & record_hashes(public))


class ServerInputs:
    """:class:`dpkit.contract.server.PublicInputs` inside the server process."""

    def __init__(self, registry: Any, model_ref: dict | None, datasets: list[dict],
                 device: torch.device, seed: int, artifacts: str | None = None,
                 privacy: dict | None = None):
        from dpkit.contract.privacy import PrivacySettings

        self._registry = registry
        self.privacy = PrivacySettings.model_validate(privacy or {})
        self._artifacts = Path(artifacts) if artifacts else cache_root() / "server-artifacts"
        self._model_ref = model_ref
        self._dataset_refs = list(datasets)
        self._datasets = {ref_key(d["name"], d.get("params")) for d in datasets}
        self.device = device
        self.seed = seed
        self._model: Any = None

    @property
    def model(self) -> Any:
        """The spec's model, loaded in this process (None when the spec names none)."""
        if self._model is None and self._model_ref is not None:
            self._model = self.load_model(self._model_ref["name"], self._model_ref["params"])
        return self._model

    def preload(self) -> None:
        """Load the spec's model and every approved dataset now, once the process is confined:
        from dpkit's cache, which the client filled when it loaded them (a confined server
        fetches nothing: it has no network and cannot write the cache)."""
        try:
            _ = self.model
            for ref in self._dataset_refs:
                self.load_dataset(ref["name"], ref.get("params"))
        except PermissionError as exc:
            raise PermissionError(
                f"{exc} — a confined server loads its public model and datasets from dpkit's "
                "cache only; where the client did not load them first (a Ray node of its own), "
                "run `dpkit data fetch NAME` there") from exc

    def load_model(self, name: str, params: dict | None = None) -> Any:
        """Load a registered model in this process (public weights, by name)."""
        return load_component(self._registry, "model", name, params or {}, self.device)

    def load_dataset(self, name: str, params: dict | None = None) -> Any:
        """Load a public dataset the runner approved for this cell (see the module docstring)."""
        if ref_key(name, params) not in self._datasets:
            raise PrivateDataError(
                f"the server asked for dataset {name!r} with params {params or {}}, which its "
                "cell did not approve; name every public dataset the server loads in its "
                "Server.public_data(params)")
        return load_component(self._registry, "dataset", name, params or {}, self.device)

    def build(self, kind: str, name: str, params: dict | None = None) -> Any:
        """Build a registered mechanism or attack (public algorithms); no datasets."""
        if kind not in ("mechanism", "attack"):
            raise PrivateDataError(f"a server builds mechanisms and attacks only, not a {kind}")
        return self._registry.build(kind, name, params or {})

    def generator(self, stream: str, device: torch.device | str | None = None) -> torch.Generator:
        """A generator seeded from the server's seed and ``stream``."""
        gen = torch.Generator(device=device or self.device)
        gen.manual_seed(derive_seed(self.seed, stream))
        return gen

    def numpy_seed(self, stream: str) -> int:
        """A 32-bit seed for numpy / scikit-learn, derived like :meth:`generator`."""
        return derive_seed(self.seed, stream) % (2**32)

    def say(self, message: str) -> None:
        """Progress of long server work (printed to the server process's standard error)."""
        import sys

        print(f"[server] {message}", file=sys.stderr, flush=True)

    def artifact_dir(self, kind: str, key: str) -> Path:
        """A cache folder for something the server trains from public inputs (e.g. a denoiser),
        apart from the client's artifacts (default ``<cache>/server-artifacts/<kind>/<key>``)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
        path = self._artifacts / kind / safe
        path.mkdir(parents=True, exist_ok=True)
        return path

    def artifact_lock(self, kind: str, key: str) -> Any:
        """Inter-process lock of one server artifact entry (see :meth:`artifact_dir`)."""
        from filelock import FileLock

        return FileLock(str(self.artifact_dir(kind, key)) + ".lock", timeout=6 * 3600)
