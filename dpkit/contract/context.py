"""RunContext: everything a defense or attack gets for one cell of a run."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
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
    noise_secret: str | None = None

    def generator(self, stream: str, device: torch.device | str | None = None) -> torch.Generator:
        """A fresh generator for ``stream``, seeded from the cell seed (same stream, same draws).

        For training randomness and subsampling the server may know. The noise that protects a
        release comes from :meth:`noise_generator`.
        """
        gen = torch.Generator(device=device or self.device)
        gen.manual_seed(derive_seed(self.seed, stream))
        return gen

    def noise_generator(self, stream: str,
                        device: torch.device | str | None = None) -> torch.Generator:
        """A generator for the noise (and the sampling) that protects a release.

        Seeded from the cell seed *and the run's noise secret*, which stays on the client: the
        spec's seeds are public, so without the secret a server that knows dpkit could
        regenerate the draws and subtract them. Same secret, seed and stream: same draws
        (methods on one stream stay paired; a resumed run continues its draws). Without a
        secret (tests) it is :meth:`generator`.
        """
        if not self.noise_secret:
            return self.generator(stream, device)
        gen = torch.Generator(device=device or self.device)
        gen.manual_seed(derive_seed(self.seed, "release-noise", self.noise_secret, stream))
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



class RunContext(SeededStreams):
    """One cell's inputs: data, model, device, seed, ledger, the wire to the server, registry, folders.

    ``wire`` and ``ledger`` belong to the runner: they are fixed when the context is built (the
    wire bound to the ledger), and assigning either raises — the runner settles the ones it
    made. Every tensor the defense sends to the untrusted side goes through ``ctx.wire.send``
    (see :mod:`dpkit.release.wire`), and ``connect(defense, ctx)`` starts that defense's server
    (its own process, built by the runner) on the first send.
    """

    _FIXED = ("ledger", "wire")
    _fixed: dict[str, Any]

    def __init__(self, dataset: Any, model: Any, device: torch.device, seed: int, ledger: Ledger,
                 registry: Registry, cache_dir: Path | None = None, work_dir: Path | None = None,
                 options: dict[str, Any] | None = None,
                 progress: Callable[[str], None] | None = None,
                 privacy: PrivacySettings | None = None,
                 wire: Wire | None = None, model_ref: dict[str, Any] | None = None,
                 dataset_ref: dict[str, Any] | None = None,
                 connect: Callable[[Any, RunContext], Any] | None = None,
                 noise_secret: str | None = None) -> None:
        wire = wire if wire is not None else Wire(ledger)
        if wire.ledger is not ledger:
            raise ValueError("RunContext.wire must be bound to RunContext.ledger")
        object.__setattr__(self, "_fixed", {"ledger": ledger, "wire": wire})
        self.dataset, self.model, self.device, self.seed = dataset, model, device, seed
        self.registry = registry
        self.cache_dir = cache_dir if cache_dir is not None else cache_root() / "artifacts"
        self.work_dir, self.options = work_dir, dict(options or {})
        self.progress, self.privacy = progress, privacy
        self.model_ref, self.dataset_ref = model_ref, dataset_ref
        self._connect = connect
        self.noise_secret = noise_secret
        self._bound: Any = None
        self.declared: set[int] = set()  # ids of the components whose releases are declared
        self._prepared: dict[int, tuple[Any, Any]] = {}

    @property
    def ledger(self) -> Ledger:
        """The cell's ledger (fixed: the runner settles this one)."""
        return self._fixed["ledger"]

    @property
    def wire(self) -> Wire:
        """The cell's wire to the server, bound to :attr:`ledger` (fixed)."""
        return self._fixed["wire"]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FIXED:
            raise AttributeError(f"RunContext.{name} belongs to the runner and cannot be replaced; "
                                 "send through ctx.wire, which charges ctx.ledger")
        object.__setattr__(self, name, value)

    def for_plan(self, ledger: Ledger) -> RunContext:
        """A context with the same inputs, a fresh ``ledger`` and a wire that cannot send (a plan
        declares releases and runs nothing)."""
        return RunContext(self.dataset, self.model, self.device, self.seed, ledger, self.registry,
                          self.cache_dir, self.work_dir, self.options, self.progress, self.privacy,
                          model_ref=self.model_ref, dataset_ref=self.dataset_ref,
                          noise_secret=self.noise_secret)

    @property
    def server_seed(self) -> int:
        """The seed the cell's server is built with (derived from :attr:`seed`; public)."""
        return derive_seed(int(self.seed), "server")

    def server_numpy_seed(self, stream: str) -> int:
        """The seed the cell's server gets from ``public.numpy_seed(stream)``: for what the client
        must hold identically to the server (a model trained there on public data)."""
        return derive_seed(self.server_seed, stream) % (2**32)

    def bind_server(self, defense: Any) -> None:
        """Let ``ctx.wire`` start ``defense``'s server on its first send (once per context)."""
        if self._bound is not None or self._connect is None:
            return
        self._bound = defense
        connect, ctx = self._connect, self
        self.wire._connect = lambda: connect(defense, ctx)

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
