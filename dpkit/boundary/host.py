"""The server process's side of a cell: one :class:`ServerHost` per cell, driven by bytes only.

The host is built from an ``init`` payload holding only public things — the defense's name and
params (from the spec), the spec's model reference, the approved public datasets, the seed, the
plug-in modules to load — and answers encoded requests: ``message`` (hand it to the server's
handler), ``attack`` (run an attack on what the server kept and return its guesses), ``tally``
(what arrived — messages, bytes and a digest per release — for the runner's cross-check against
its meter and for tests), ``labels`` (the phases and handler names the server takes, which the
wire asks for before the first message). After a ``final`` tally (the runner's, once the run is over) every
message is refused: the attacks see what the cross-check counted, and nothing sent later.
"""

from __future__ import annotations

import hashlib
import importlib
import traceback
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from dpkit.boundary.public import ServerInputs
from dpkit.contract.attacks import attack_view
from dpkit.contract.context import AttackContext
from dpkit.contract.server import STANDARD_PHASES, STANDARD_RELEASES, Message, Server
from dpkit.release.codec import decode, encode
from dpkit.release.meter import tensor_bytes


def registry_from_modules(plugins: dict[str, str]) -> Any:
    """A registry built in this process from the plug-in modules the runner loaded."""
    from dpkit.contract.plugins import PluginSystem

    system = PluginSystem()
    for name, module in plugins.items():
        system.add(importlib.import_module(module), name)
    return system.registry


def server_class(defense_cls: type) -> type[Server]:
    """The server part a defense names (``server = ...``), or the passive :class:`Server`."""
    cls = getattr(defense_cls, "server", None) or Server
    if not (isinstance(cls, type) and issubclass(cls, Server)):
        raise TypeError(f"defense {getattr(defense_cls, 'name', defense_cls)!r}: its server must "
                        f"be a dpkit.Server subclass, got {cls!r}")
    return cls


class ServerHost:
    """Builds and drives one cell's server (see the module docstring)."""

    def __init__(self, init: dict[str, Any], registry: Any = None,
                 defense_cls: Any = None,
                 prepare: Callable[[ServerInputs], None] | None = None):
        self.registry = registry if registry is not None else registry_from_modules(init["plugins"])
        if defense_cls is None:  # a server process knows the defense by its registered name
            defense_cls = self.registry.get("defense", init["defense"]).cls
        params = defense_cls.Params.model_validate(init["params"])
        self.device = torch.device(init["device"])
        self.seed = int(init["seed"])
        self.public = ServerInputs(self.registry, init.get("model"), init.get("datasets", []),
                                   self.device, self.seed, init.get("artifacts"),
                                   init.get("privacy"))
        if prepare is not None:  # e.g. load the public inputs, then confine the process
            prepare(self.public)
        self.server = server_class(defense_cls)(params, self.public)
        self.taken = self._labels(type(self.server))
        """The phases and handler names the server takes, fixed before any message arrives."""
        self.messages: dict[str, int] = defaultdict(int)
        self.batches: dict[str, int] = defaultdict(int)
        self.bytes: dict[str, int] = defaultdict(int)
        self.digests: dict[str, Any] = {}
        self.ended = False
        """Set by the runner's final tally: no message is taken after it."""
        self.received: list[Message] | None = [] if init.get("record") else None
        """Every message as it arrived, kept only when the init asks (the auditor's in-process
        server: it scores what crossed)."""

    def handle(self, data: bytes) -> bytes:
        """Answer one encoded request; a failure comes back as an encoded error."""
        try:
            request = decode(data)
            op = request.get("op")
            if op == "message":
                return encode(self.receive(request))
            if op == "attack":
                return encode(self.attack(request))
            if op == "labels":
                return encode(self.taken)
            if op == "tally":
                self.ended = self.ended or bool(request.get("final"))
                return encode({"messages": dict(self.messages), "bytes": dict(self.bytes),
                               "digests": {k: d.hexdigest() for k, d in self.digests.items()}})
            raise ValueError(f"unknown request {op!r}")
        except Exception as exc:  # the client re-raises it with the server's traceback
            message = str(exc)
            if isinstance(exc, PermissionError):
                message += (" (a server process reads only code, system folders and public inputs;"
                            " see dpkit.boundary.confine)")
            return encode({"__error__": type(exc).__name__, "message": message,
                           "traceback": traceback.format_exc()})

    @staticmethod
    def _labels(cls: type[Server]) -> dict[str, list[str]]:
        return {"phases": sorted({*STANDARD_PHASES, *cls.phases}),
                "handlers": sorted(cls.handlers),
                "releases": sorted({*STANDARD_RELEASES, *cls.receives, *cls.handlers})}

    def receive(self, request: dict[str, Any]) -> Any:
        """Hand one message to the server; its answer goes back to the client."""
        tensor = request["tensor"]
        name = request["name"]
        if self.ended:
            raise RuntimeError(f"{name!r} arrived after the run ended (the runner has taken its "
                               "final tally of what crossed); nothing more reaches the server — "
                               "send everything from run(ctx), before it returns")
        self.messages[name] += 1
        if tensor is not None:
            self.bytes[name] += tensor_bytes(tensor)
            self.digests.setdefault(name, hashlib.blake2b(digest_size=16)).update(
                tensor.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
            tensor = tensor.to(self.device)
        mask = request["mask"]
        if tensor is None and name not in self.server.handlers:
            raise ValueError(f"request {name!r} names no handler of "
                             f"{type(self.server).__name__}")
        if tensor is not None and name not in self.taken["releases"]:
            raise ValueError(f"release {name!r} is not one {type(self.server).__name__} takes")
        phase = str(request["phase"])
        message = Message(name, phase, self.batches[phase], tensor,
                          None if mask is None else mask.to(self.device))
        self.batches[phase] += 1
        if self.received is not None:
            self.received.append(message)
        return self.server.receive(message)

    def attack(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run attack ``name`` on the server's view and public knowledge; return its guesses."""
        attack = self.registry.build("attack", request["name"], request["params"])
        observed = self.server.view()
        missing = [r for r in attack.requires if r not in observed]
        if missing:
            return {"skipped": f"the server kept no {', '.join(missing)}"}
        from dpkit.release.view import ServerView

        view = attack_view(ServerView(observed=dict(observed), knowledge=self.server.knowledge()),
                           tuple(attack.requires))
        actx = AttackContext(self.device, int(request["seed"]))
        return {"guesses": attack.run(view, actx)}
