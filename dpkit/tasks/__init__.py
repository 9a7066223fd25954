"""Generic tasks the runner wraps around components: ``privatize_text`` for token mechanisms."""

from dpkit.hookspecs import hookimpl
from dpkit.tasks.classifier import (
    clear_classifiers,
    doc_features,
    train_text_classifier,
)
from dpkit.tasks.privatize import PrivatizeText, encode_docs, space_of

__all__ = ["PrivatizeText", "clear_classifiers", "doc_features", "encode_docs", "space_of",
           "train_text_classifier"]


@hookimpl
def dpkit_register_defenses(register):
    """Register the ``privatize_text`` defense."""
    register(PrivatizeText)
