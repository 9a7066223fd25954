"""dpkit: privacy-preserving language-model mechanisms as plug-ins, with one privacy ledger."""

from dpkit.component import Component
from dpkit.context import RunContext
from dpkit.hookspecs import hookimpl
from dpkit.params import NoParams, Params
from dpkit.protocols import Attack, DatasetSource, Defense, DefenseResult, Mechanism, ModelSource, ServerView
from dpkit.space import EmbeddingSpace
from dpkit.wire import Release, Wire

__version__ = "0.1.0"

__all__ = [
    "Attack",
    "Component",
    "DatasetSource",
    "Defense",
    "DefenseResult",
    "EmbeddingSpace",
    "Mechanism",
    "ModelSource",
    "RunContext",
    "NoParams",
    "Params",
    "Release",
    "ServerView",
    "Wire",
    "hookimpl",
]
