"""dpkit: privacy-preserving language-model mechanisms as plug-ins, with one privacy ledger."""

from dpkit.base import compat as _compat
from dpkit.contract.component import Component
from dpkit.contract.context import RunContext
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import NoParams, Params
from dpkit.contract.protocols import Attack, DatasetSource, Defense, DefenseResult, Mechanism, ModelSource, ServerView
from dpkit.contract.server import Message, PublicInputs, Server, handles
from dpkit.release.wire import Release, Wire
from dpkit.text.space import EmbeddingSpace

_compat.install()  # old module paths (dpkit.context, dpkit.wire, …) keep working for one release

__version__ = "0.1.0"

__all__ = [
    "Attack",
    "Component",
    "DatasetSource",
    "Defense",
    "DefenseResult",
    "EmbeddingSpace",
    "Mechanism",
    "Message",
    "ModelSource",
    "PublicInputs",
    "RunContext",
    "NoParams",
    "Params",
    "Release",
    "Server",
    "ServerView",
    "Wire",
    "handles",
    "hookimpl",
]
