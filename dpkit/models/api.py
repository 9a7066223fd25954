"""Convenience loader for scripts and notebooks: any registered model by name."""

from __future__ import annotations

from typing import Any

from dpkit.contract.context import resolve_device


def load_model(name: str, params: dict | None = None, device: str = "auto") -> Any:
    """Load the registered model ``name`` onto ``device`` (``auto``: CUDA when available)."""
    from dpkit.contract.plugins import get_registry

    return get_registry().build("model", name, params or {}).load(resolve_device(device))
