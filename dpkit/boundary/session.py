"""The runner's side of a cell's boundary: start the server, run the attacks there, cross-check.

:func:`connector` gives a :class:`~dpkit.contract.context.RunContext` the function its wire calls
on the first send: it checks the public datasets the defense's server asks for against the cell's
private records, builds the ``init`` payload from public things only, and starts the server (a
fresh process by default). After the run, :func:`remote_attack` runs an attack where the server
is and returns its guesses, and :func:`cross_check` compares what the server says arrived with
what the runner's meter counted.
"""

from __future__ import annotations

from typing import Any

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.boundary.channel import InProcessChannel, ProcessChannel
from dpkit.boundary.fork_server import channel_kind
from dpkit.boundary.confine import confine_mode, public_paths
from dpkit.boundary.host import server_class
from dpkit.boundary.public import PrivateDataError, overlapping_records
from dpkit.release.codec import decode, encode, raise_if_error
from dpkit.release.meter import UP


def approved_datasets(defense: Any, ctx: Any) -> list[dict[str, Any]]:
    """The public datasets the defense's server names, each checked to share no record with the
    cell's private dataset (raises :class:`PrivateDataError` naming the one that does)."""
    refs = []
    for name, params in server_class(type(defense)).public_data(defense.params):
        if ctx.dataset is not None:
            public = ctx.load_dataset(name, params)
            shared = overlapping_records(ctx.dataset, public)
            if shared or public is ctx.dataset:
                raise PrivateDataError(
                    f"{defense.name}'s server asks for dataset {name!r}, which shares {shared} "
                    f"records with the cell's private dataset {getattr(ctx.dataset, 'name', '')!r}; "
                    "a server may only load public data")
        refs.append({"name": name, "params": dict(params or {})})
    return refs


def private_cache_paths(ctx: Any) -> list[str]:
    """The cache folders of the cell's private corpus (its pinned artifact, fetched and
    unpacked), which a confined server may not read."""
    ref = getattr(ctx, "dataset_ref", None)
    if not ref:
        return []
    source = ctx.registry.build("dataset", ref["name"], ref.get("params") or {})
    artifact = getattr(source, "artifact", None)
    if artifact is None:
        return []
    return [str(artifact.entry_dir()), str(artifact.download_dir())]


def privacy_of(ctx: Any) -> dict[str, Any]:
    """The cell's privacy settings (public: they are in the spec), else its ledger's δ and
    accountant, as the server gets them."""
    if ctx.privacy is not None:
        return ctx.privacy.model_dump(mode="json")
    return {"delta": float(getattr(ctx.ledger, "delta_target", 1e-5)),
            "accountant": str(getattr(ctx.ledger, "accountant", "rdp"))}


def init_payload(defense: Any, ctx: Any) -> dict[str, Any]:
    """What the server process is built from: public things only (its seed is derived from the
    cell's, so it cannot regenerate the client's draws from it)."""
    datasets = approved_datasets(defense, ctx)
    return {"defense": defense.name, "params": defense.params.model_dump(mode="json"),
            "model": ctx.model_ref, "datasets": datasets,
            "seed": ctx.server_seed, "device": str(ctx.device), "privacy": privacy_of(ctx),
            "plugins": dict(getattr(ctx.registry, "modules", {})),
            "artifacts": str(ctx.cache_dir.parent / "server-artifacts"),
            "public_paths": public_paths((ctx.model_ref or {}).get("params"),
                                         [d["params"] for d in datasets]),
            "record": bool(ctx.options.get("record_uploads")), "confine": confine_mode(),
            "private_paths": private_cache_paths(ctx)}


def server_modules(defense: Any) -> list[str]:
    """The modules a server process of ``defense`` imports: its class's and its server's."""
    return defense_class_modules(type(defense))


def defense_class_modules(cls: type) -> list[str]:
    """The modules a server process of a defense of class ``cls`` imports: its and its server's."""
    return list(dict.fromkeys([cls.__module__, server_class(cls).__module__]))


class Connector:
    """``connect(defense, ctx)`` for a context: starts the server of ``defense`` for ``ctx`` —
    ``kind`` ``process`` (a fresh process, the default), ``ray`` (a fresh Ray actor) or
    ``inprocess`` (no isolation: measurements and tests); None reads ``$DPKIT_SERVER``.

    :meth:`start` lets the runner start a process server before the client's first send, so its
    start overlaps the client's own work; the wire's first send then adopts it.
    """

    def __init__(self, kind: str | None = None):
        self.kind = kind
        self._early: tuple[Any, Any, dict, Any] | None = None  # (defense, ctx, params, channel)
        self.channel: Any = None
        """The channel this connector handed out (the runner's: the wire holds a
        :class:`ClientEnd` of it), None until the first send."""

    def __call__(self, defense: Any, ctx: Any) -> ClientEnd:
        """The wire's end of the channel to ``defense``'s server for ``ctx``: the one
        :meth:`start` began when it was for the same defense, context and parameters, else a
        new one."""
        early, self._early = self._early, None
        channel = None
        if early is not None:
            if (early[0] is defense and early[1] is ctx
                    and early[2] == defense.params.model_dump(mode="json")):
                channel = early[3]
            else:
                close_soon(early[3])
        self.channel = self._open(defense, ctx, wait=True) if channel is None else channel
        return ClientEnd(self.channel)

    def start(self, defense: Any, ctx: Any) -> None:
        """Start a process server now without waiting for it; a failure here is left for the
        first send to raise (it builds the server again)."""
        if (self.kind or channel_kind()) != "process" or self._early is not None:
            return
        try:
            params = defense.params.model_dump(mode="json")
            self._early = (defense, ctx, params, self._open(defense, ctx, wait=False))
        except Exception:  # noqa: BLE001 - the first send builds it again and reports why
            self._early = None

    def discard(self) -> None:
        """Close a server :meth:`start` began that no send adopted."""
        if self._early is not None:
            channel, self._early = self._early[3], None
            close_soon(channel)

    def _open(self, defense: Any, ctx: Any, wait: bool) -> Any:
        init = init_payload(defense, ctx)
        chosen = self.kind or channel_kind()
        if chosen == "inprocess":  # same process: the defense's own class (a test's works too)
            return InProcessChannel(init, ctx.registry, type(defense))
        preload = [*sorted(set(init["plugins"].values())), *server_modules(defense)]
        if chosen == "ray":
            from dpkit.boundary.ray_channel import RayChannel

            return RayChannel(init, num_gpus=1 if ctx.device.type == "cuda" else 0,
                              preload=preload)
        return ProcessChannel(init, preload=preload, wait=wait)


class ClientEnd:
    """What a cell's wire holds of the channel to its server: :meth:`request` and :meth:`close`.

    The runner keeps the channel itself (:attr:`Connector.channel`) and takes the tally and runs
    the attacks through that, so nothing a plug-in does to the object ``ctx.wire.channel()``
    returns — a ``request`` that rewrites the tally, or slips the raw rows in before an attack —
    is on the runner's path; and, having no ``__dict__``, the end itself takes no new attribute.
    """

    __slots__ = ("_channel",)

    def __init__(self, channel: Any):
        self._channel = channel

    def request(self, data: bytes) -> bytes:
        """Deliver one encoded message; return the encoded answer."""
        return self._channel.request(data)

    def close(self) -> None:
        """End the server (the cell's later sends fail)."""
        self._channel.close()

    @property
    def host(self) -> Any:
        """An in-process server's host (tests and the auditor); None for a process or actor."""
        return getattr(self._channel, "host", None)


def close_soon(channel: Any) -> None:
    """Close ``channel``; a server process exits in the background, not on the caller's time."""
    if isinstance(channel, ProcessChannel):
        channel.close(wait=False)
    else:
        channel.close()


def connector(kind: str | None = None) -> Connector:
    """``connect(defense, ctx)`` starting the server of ``defense`` for ``ctx`` (see
    :class:`Connector`)."""
    return Connector(kind)


def server_description(channel: Any) -> str:
    """Where a cell's server ran and how it was confined (for its result): ``process: landlock
    ABI 7; …``, ``ray: …``, ``inprocess: not isolated``, or empty when nothing was sent."""
    if channel is None:
        return ""
    kind = getattr(channel, "kind", type(channel).__name__)
    return f"{kind}: {getattr(channel, 'confinement', None) or 'not isolated'}"


def remote_attack(channel: Any, name: str, params: dict, seed: int) -> dict[str, Any]:
    """Run attack ``name`` in the server process; ``{"guesses": ...}`` or ``{"skipped": why}``."""
    request = {"op": "attack", "name": name, "params": params, "seed": int(seed)}
    return raise_if_error(decode(channel.request(encode(request))))


def tally(channel: Any, final: bool = False) -> dict[str, Any]:
    """What the server says arrived: messages, bytes and a digest of the tensors, per release;
    ``final``: the run is over, so the server refuses every message after this one."""
    request = {"op": "tally", "final": True} if final else {"op": "tally"}
    return raise_if_error(decode(channel.request(encode(request))))


def cross_check(channel: Any, wire: Any) -> list[str]:
    """Names whose messages or bytes the server received differ from what the meter counted
    (something reached the server outside the runner's wire), each recorded as ε = ∞. The tally
    is final: nothing sent after it (by a thread the plug-in left behind) reaches the server."""
    arrived = tally(channel, final=True)
    meter = wire._meter
    counted = {name: meter.messages.get(name, 0)
               for name in set(meter.messages) | set(arrived["messages"])}
    up = {name: sum(n for (_, d, k), n in meter.totals.items() if d == UP and k == name)
          for name in counted}
    odd = sorted(name for name in counted
                 if arrived["messages"].get(name, 0) != counted[name]
                 or arrived["bytes"].get(name, 0) != up[name])
    for name in odd:
        wire.ledger.spend(NoGuarantee(
            f"{name}: the server received {arrived['messages'].get(name, 0)} message(s), "
            f"{arrived['bytes'].get(name, 0)} bytes, but the runner's wire metered {counted[name]} "
            f"message(s), {up[name]} bytes: something crossed outside ctx.wire"),
            f"{name} (outside the wire)")
    return odd
