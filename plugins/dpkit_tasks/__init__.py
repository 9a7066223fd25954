"""Built-in generic tasks: ``privatize_text``, the defense a spec's ``mechanism:`` cell runs (any token
mechanism on text, scored by a utility classifier)."""

from dpkit import hookimpl
from dpkit_tasks.classifier import (
    clear_classifiers,
    doc_features,
    train_text_classifier,
)
from dpkit_tasks.privatize import PrivatizeText, encode_docs, space_of

__all__ = ["PrivatizeText", "clear_classifiers", "doc_features", "encode_docs", "space_of",
           "train_text_classifier"]


@hookimpl
def dpkit_register_defenses(register):
    """Register the ``privatize_text`` defense."""
    register(PrivatizeText)
