"""Convenience loader for scripts and notebooks: any registered dataset by name."""

from __future__ import annotations

from typing import Any


def load_dataset(name: str, params: dict | None = None) -> Any:
    """Load the registered dataset ``name`` with ``params`` (fetching its artifact if needed)."""
    from dpkit.contract.plugins import get_registry

    return get_registry().build("dataset", name, params or {}).load()
