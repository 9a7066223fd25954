"""RunContext: everything a defense or attack gets for one cell of a run."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from dpkit.base.cache import cache_root, process_cache
from dpkit.release.wire import Wire

T = TypeVar("T")

if TYPE_CHECKING:
    from dpkit.accounting import Ledger
    from dpkit.contract.privacy import PrivacySettings
    from dpkit.contract.registry import Registry


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} was requested but no CUDA GPU is available; "
                           "use device: auto or cpu")
    return torch.device(device)


def derive_seed(seed: int, *streams: str) -> int:
    """A 63-bit seed derived from ``seed`` and stream names (independent, reproducible streams)."""
    h = hashlib.sha256(str(seed).encode())
    for s in streams:
        h.update(b"\0" + s.encode())
    return int.from_bytes(h.digest()[:8], "little") >> 1


_LOADED = process_cache("dpkit.loaded_components",
                        "datasets and models loaded by the runner, by (kind, name, params, device)")


def load_component(registry: Registry, kind: str, name: str, params: dict,
                   device: torch.device) -> Any:
    """Build and load a dataset or model source, memoized on (kind, name, params, device)."""
    import json

    key = (kind, name, json.dumps(params, sort_keys=True, default=str), str(device))

    def load() -> Any:
        source = registry.build(kind, name, params)
        return source.load() if kind == "dataset" else source.load(device)

    return _LOADED.get_or_build(key, load)


def clear_loaded() -> None:
    """Drop the per-process cache of loaded datasets and models."""
    _LOADED.clear()


class SeededStreams:
    """Seeded random streams and progress messages, shared by the run's and an attack's context
    (``self.device``, ``self.seed`` and ``self.progress`` come from the dataclass using it)."""

    device: torch.device
    seed: int
    progress: Callable[[str], None] | None

    def generator(self, stream: str, device: torch.device | str | None = None) -> torch.Generator:
        """A fresh generator for ``stream``, seeded from the cell seed (same stream, same draws)."""
        gen = torch.Generator(device=device or self.device)
        gen.manual_seed(derive_seed(self.seed, stream))
        return gen

    def numpy_seed(self, stream: str) -> int:
        """A 32-bit seed for numpy / scikit-learn / gensim, derived like :meth:`generator`."""
        return derive_seed(self.seed, stream) % (2**32)

    def say(self, message: str) -> None:
        """Report progress of long work (shown under the run's progress bar)."""
        if self.progress is not None:
            self.progress(message)


@dataclass(frozen=True)
class AttackContext(SeededStreams):
    """What an attack gets besides the view: a device, seeded generators and progress.

    No dataset, model, ledger or registry: an attack sees only what crossed the wire and the
    public knowledge the defense stated (see :func:`dpkit.contract.attacks.run_attack`).
    """

    device: torch.device
    seed: int
    progress: Callable[[str], None] | None = None



@dataclass
class RunContext(SeededStreams):
    """One cell's inputs: data, model, device, seed, ledger, the wire to the server, registry, folders.

    ``wire`` is bound to ``ledger``: every tensor the defense sends to the untrusted side goes
    through ``ctx.wire.send`` (see :mod:`dpkit.release.wire`).
    """

    dataset: Any
    model: Any
    device: torch.device
    seed: int
    ledger: Ledger
    registry: Registry
    cache_dir: Path = field(default_factory=lambda: cache_root() / "artifacts")
    work_dir: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    progress: Callable[[str], None] | None = None
    privacy: PrivacySettings | None = None  # the spec's privacy: block (None outside a run)
    wire: Wire = None  # type: ignore[assignment]  # bound to ``ledger`` in __post_init__
    _prepared: dict[int, tuple[Any, Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.wire is None:
            self.wire = Wire(self.ledger)
        elif self.wire.ledger is not self.ledger:
            raise ValueError("RunContext.wire must be bound to RunContext.ledger")

    def load_dataset(self, name: str, params: dict | None = None) -> Any:
        """Load another registered dataset (e.g. public data for training), cached per process."""
        return load_component(self.registry, "dataset", name, params or {}, self.device)

    def load_model(self, name: str, params: dict | None = None) -> Any:
        """Load another registered model onto this cell's device, cached per process."""
        return load_component(self.registry, "model", name, params or {}, self.device)

    def build(self, kind: str, name: str, params: dict | None = None) -> Any:
        """Instantiate a registered component (e.g. a mechanism a defense uses) by name."""
        return self.registry.build(kind, name, params or {})

    def artifact_dir(self, kind: str, key: str) -> Path:
        """A cache folder for a trained artifact (e.g. a denoiser) identified by ``key``."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)
        path = self.cache_dir / kind / safe
        path.mkdir(parents=True, exist_ok=True)
        return path

    def artifact_lock(self, kind: str, key: str):
        """Inter-process lock for one artifact entry: hold it while checking, training and saving,
        so concurrent workers (e.g. on Ray) train an artifact once and never tear a file."""
        from filelock import FileLock

        folder = self.artifact_dir(kind, key)
        return FileLock(str(folder) + ".lock", timeout=6 * 3600)

    def prepared(self, owner: Any, build: Callable[[], T]) -> T:
        """What ``owner`` (e.g. a defense) prepared for this run, built once per cell.

        A defense that computes the same thing in ``releases(ctx)`` and ``run(ctx)`` (tokenized
        data, a split) asks for it here instead of keeping a private memo on itself.
        """
        entry = self._prepared.get(id(owner))
        if entry is None or entry[0] is not owner:  # the owner is kept, so its id is never reused
            entry = (owner, build())
            self._prepared[id(owner)] = entry
        return entry[1]

    def for_attack(self) -> AttackContext:
        """The context an attack gets: this cell's device, seed and progress, nothing private."""
        return AttackContext(self.device, self.seed, self.progress)
