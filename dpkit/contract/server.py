"""The untrusted side of a defense: a :class:`Server` built in its own process from public inputs.

A defense names its server part (``server = MyServer``); without one it gets :class:`Server`,
which keeps every real row it receives. The runner starts one server process per cell, builds
the server there from the defense's params (public: they are in the spec) and
:class:`PublicInputs` (the spec's model and public datasets, loaded there by name), and hands it
each message the client sends as a fresh :class:`Message` decoded from bytes. A handler's return
value (tensors, numbers, lists or dicts of them) goes back to the client as bytes.

Whatever the server keeps with :meth:`Server.observe` is what the attacks see, with
:meth:`Server.knowledge`; both are computed in the server process, which never held anything
but public inputs and what crossed the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

if TYPE_CHECKING:
    import torch
    from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])

STANDARD_PHASES = ("run", "setup", "train", "validation", "eval", "test", "restore")
"""The phases every server takes (``ctx.wire.phase``); a server names more in :attr:`Server.phases`."""

STANDARD_RELEASES = ("embeddings", "hidden_states", "token_ids", "substituted_ids", "labels",
                     "gradients", "model")
"""The release names every server takes; a server takes its handlers' names too, and names more
in :attr:`Server.receives`."""


@dataclass(frozen=True)
class Message:
    """One send as the server receives it: a fresh tensor decoded from the bytes that crossed.

    ``mask`` marks the real rows (elements) when the release declares padding (the wire verified
    it: padding closes each sequence, so ``mask`` gives lengths and nothing else), ``batch`` how
    many messages of ``phase`` reached the server before this one (counted there: no number the
    client chooses crosses). ``tensor`` is None for a request.
    """

    name: str
    phase: str
    batch: int
    tensor: torch.Tensor | None
    mask: torch.Tensor | None = None

    @property
    def lengths(self) -> list[int]:
        """Real rows (elements) per entry of the first dimension, from the verified padding."""
        if self.mask is None:
            raise ValueError(f"message {self.name!r}: its release declares no padding, so it has "
                             "no lengths; declare Release(..., padding=...) and pad each sequence")
        return [int(n) for n in self.mask.reshape(self.mask.shape[0], -1).sum(dim=1).tolist()]

    @property
    def rows(self) -> torch.Tensor:
        """The real rows of :attr:`tensor` (all of them when no padding was declared)."""
        if self.tensor is None:
            raise ValueError(f"message {self.name!r} is a request: it carries no tensor")
        if self.mask is None:
            return self.tensor
        return self.tensor[self.mask]


def handles(name: str) -> Callable[[F], F]:
    """Mark a :class:`Server` method as the handler of messages sent under release ``name``."""
    def mark(method: F) -> F:
        method.__dpkit_handles__ = name  # type: ignore[attr-defined]
        return method
    return mark


class PublicInputs(Protocol):
    """What a server may build itself from: the spec's public components, loaded by name."""

    @property
    def model(self) -> Any:
        """The spec's model, loaded in the server process (None when the spec names none)."""

    @property
    def device(self) -> torch.device:
        """The server's device."""

    @property
    def seed(self) -> int:
        """The server's own seed (derived from the cell's; never the client's)."""

    @property
    def privacy(self) -> Any:
        """The cell's :class:`dpkit.PrivacySettings` (δ, accountant: public, in the spec)."""

    def numpy_seed(self, stream: str) -> int:
        """A 32-bit seed for numpy / gensim from the server's seed and ``stream``."""

    def load_model(self, name: str, params: dict | None = None) -> Any:
        """Load a registered model in the server process."""

    def load_dataset(self, name: str, params: dict | None = None) -> Any:
        """Load a registered *public* dataset (the cell's private dataset is refused)."""

    def build(self, kind: str, name: str, params: dict | None = None) -> Any:
        """Build a registered component (e.g. the public mechanism, to simulate it)."""

    def generator(self, stream: str, device: torch.device | str | None = None) -> torch.Generator:
        """A seeded generator for the server's own randomness."""

    def say(self, message: str) -> None:
        """Progress of long server work."""

    def artifact_dir(self, kind: str, key: str) -> Any:
        """A cache folder (a ``pathlib.Path``) for what the server trains from public inputs."""

    def artifact_lock(self, kind: str, key: str) -> Any:
        """An inter-process lock of one :meth:`artifact_dir` entry (a context manager)."""


class Server:
    """The server part of a defense (see the module docstring); subclass and add handlers.

    ``params`` are the defense's validated params, ``public`` the public inputs. A message whose
    release has no handler is kept under its name with :meth:`observe` (real rows only, the first
    :attr:`keep_rows` of them) and answered with None.
    """

    handlers: ClassVar[dict[str, str]] = {}
    phases: ClassVar[tuple[str, ...]] = ()
    """Phases this server takes besides :data:`STANDARD_PHASES`. The wire asks the server for
    its phases and handlers before the first message, and refuses any other phase, and any
    request naming no handler, before it crosses: a label the client makes up could spell
    private data."""
    receives: ClassVar[tuple[str, ...]] = ()
    """Release names this server takes besides its handlers' and :data:`STANDARD_RELEASES`
    (kept, without a handler, under their name). A tensor sent under any other name is refused
    before it crosses: a name the client made up could spell private data."""
    keep_rows: ClassVar[int | None] = 1_000_000
    """Rows a release without a handler keeps for the attacks (None: all), so that a stream of
    training-time messages (DP-SGD's gradients) does not fill the server's memory."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found = dict(getattr(cls, "handlers", {}))
        for attr, value in vars(cls).items():
            name = getattr(value, "__dpkit_handles__", None)
            if name is not None:
                found[name] = attr
        cls.handlers = found

    @classmethod
    def public_data(cls, params: BaseModel) -> list[tuple[str, dict]]:
        """The public datasets ``(name, params)`` this server loads with
        ``public.load_dataset``; the runner refuses any that shares a record with the cell's
        private dataset before the server starts (default: none)."""
        return []

    def __init__(self, params: BaseModel, public: PublicInputs):
        self.params = params
        self.public = public
        self._observed: dict[str, Any] = {}
        self._chunks: dict[str, list[Any]] = {}
        self._kept: dict[str, int] = {}

    @property
    def observed(self) -> dict[str, Any]:
        """Everything observed so far, by key (each key's rows joined on first read)."""
        import torch

        for key, chunks in self._chunks.items():
            if len(chunks) > 1:
                chunks[:] = [torch.cat([c.to(chunks[0].device) for c in chunks])]
            if chunks:
                self._observed[key] = chunks[0]
        return self._observed

    def receive(self, message: Message) -> Any:
        """Dispatch ``message`` to its handler; without one, keep its real rows."""
        attr = self.handlers.get(message.name)
        if attr is not None:
            return getattr(self, attr)(message)
        if message.tensor is not None:
            self.observe(message.name, message.rows, self.keep_rows)
        return None

    def observe(self, key: str, rows: Any, keep: int | None = None) -> None:
        """Keep ``rows`` under ``key`` for the attacks, appended to what is there (at most
        ``keep`` rows in all); a non-tensor value replaces what is there."""
        import torch

        if not isinstance(rows, torch.Tensor) or rows.ndim == 0:
            self._chunks.pop(key, None)
            self._kept.pop(key, None)
            self._observed[key] = rows
            return
        have = self._kept.get(key, 0)
        if keep is not None:
            rows = rows[:max(keep - have, 0)]
        if not have:
            self._chunks[key] = []
        self._chunks[key].append(rows)  # joined once, when read: appending stays linear
        self._kept[key] = have + int(rows.shape[0])

    def view(self) -> dict[str, Any]:
        """What the attacks may read as ``view.observed`` (default: everything observed)."""
        return self.observed

    def knowledge(self) -> dict[str, Any]:
        """Public knowledge the attacks get (default: the public model's embedding space, if any)."""
        from dpkit.text.space import EmbeddingSpace

        model = self.public.model
        if isinstance(model, EmbeddingSpace):
            return {"space": model}
        if hasattr(model, "as_space"):
            return {"space": model.as_space()}
        return {}
