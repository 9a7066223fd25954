"""What a message's labels may say: its phase and, for a request, the handler it names.

Besides its tensor, a message crosses with strings and a shape the client picks: the phase
(``ctx.wire.phase``), the release or handler name, the tensor's shape. A string chosen at run
time could spell private data. So the wire asks the server, before the first message, which
phases, handlers and release names it takes — its answer comes from the server's class alone
(:attr:`dpkit.Server.phases`, its handlers, :attr:`dpkit.Server.receives` and
:data:`dpkit.STANDARD_RELEASES`), fixed before anything private arrived — and refuses, before
it crosses, any other phase, any request naming no handler and any tensor sent under a name the
server does not take. What stays is the choice among these labels, message by message (the
schedule); a tensor's shape is held to its release's form by :mod:`dpkit.release.shapes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpkit.base.errors import AccountingError

if TYPE_CHECKING:  # validating a spec imports the declarations, and never torch
    import torch

QUESTION = {"op": "labels"}
"""The request the wire sends first, answered by :class:`dpkit.boundary.host.ServerHost`."""


@dataclass(frozen=True)
class Labels:
    """The phases, handler names and release names one cell's server takes."""

    phases: frozenset[str]
    handlers: frozenset[str]
    releases: frozenset[str]

    @classmethod
    def from_answer(cls, answer: Any) -> Labels:
        """The server's answer to :data:`QUESTION`, checked to be three lists of strings."""
        if not isinstance(answer, Mapping) or not all(
                isinstance(answer.get(k), list) and all(isinstance(v, str) for v in answer[k])
                for k in ("phases", "handlers", "releases")):
            raise AccountingError("the server did not say which phases, handlers and releases it "
                                  f"takes (got {type(answer).__name__}); nothing was sent")
        return cls(frozenset(answer["phases"]), frozenset(answer["handlers"]),
                   frozenset(answer["releases"]))

    def check(self, phase: str, name: str, tensor: torch.Tensor | None) -> None:
        """Refuse a send whose phase, request name or release name is not the server's."""
        if phase not in self.phases:
            raise AccountingError(
                f"phase {short_label(phase)} is not one the server takes {sorted(self.phases)}; a "
                "phase is a label the server names in advance (dpkit.Server.phases), since "
                "one made up at run time could spell private data. Nothing was sent")
        if tensor is None and name not in self.handlers:
            raise AccountingError(
                f"request {short_label(name)} names no handler of the server {sorted(self.handlers)}; "
                "a request carries only its name, which must be a handler's. Nothing was sent")
        if tensor is not None and name not in self.releases:
            raise AccountingError(
                f"release {short_label(name)} is not one the server takes; it takes "
                f"{sorted(self.releases)}. A release's name crosses with each message, so it comes "
                "from the server's class: give it a handler (@dpkit.handles), list it in "
                "dpkit.Server.receives, or use a standard name (dpkit.STANDARD_RELEASES). "
                "Nothing was sent")


def short_label(label: object, keep: int = 60) -> str:
    """``repr`` of ``label``, a string cut to its first ``keep`` characters and "…"."""
    if isinstance(label, str) and len(label) > keep:
        label = label[:keep] + "…"
    return repr(label)
