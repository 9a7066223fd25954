"""What dataset plug-ins build on: dataset types, pinned-artifact sources and their cache, seeded splits."""

from dpkit.contract.plugins import load_dataset
from dpkit.data.sources import (HubSource, LocalSource, PinnedArtifact, fetch_artifact,
                                manual_hint, sha256_file)
from dpkit.data.splits import build_dataset, seeded_split, subsample
from dpkit.data.types import Analogies, TextDataset, TextSplit, WordPairs

__all__ = [
    "Analogies",
    "HubSource",
    "LocalSource",
    "PinnedArtifact",
    "TextDataset",
    "TextSplit",
    "WordPairs",
    "build_dataset",
    "fetch_artifact",
    "load_dataset",
    "manual_hint",
    "seeded_split",
    "sha256_file",
    "subsample",
]
