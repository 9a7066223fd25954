"""dpkit: privacy-preserving language-model mechanisms as plug-ins, with one privacy ledger."""

from dpkit.hookspecs import hookimpl
from dpkit.params import NoParams, Params
from dpkit.protocols import Attack, DatasetSource, Defense, DefenseResult, Mechanism, ModelSource, ServerView
from dpkit.space import EmbeddingSpace
from dpkit.wire import Release, Wire

__version__ = "0.1.0"

__all__ = [
    "Attack",
    "DatasetSource",
    "Defense",
    "DefenseResult",
    "EmbeddingSpace",
    "Mechanism",
    "ModelSource",
    "NoParams",
    "Params",
    "Release",
    "ServerView",
    "Wire",
    "hookimpl",
]
