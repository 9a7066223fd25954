"""Built-in datasets: real corpora and word benchmarks from pinned artifacts, and your own local files."""

import dpkit
from dpkit_datasets.catalogue import DATASETS

__all__ = ["DATASETS"]


@dpkit.hookimpl
def dpkit_register_datasets(register) -> None:
    """Register the built-in datasets."""
    for cls in DATASETS:
        register(cls)
