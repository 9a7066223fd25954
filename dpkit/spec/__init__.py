"""Experiment specs: schema, loading, expansion into cells, and the check against a registry.

``load_spec(path)`` reads the file (merging ``include:`` files), validates its structure, then
checks every component and every expanded cell against the registry; it returns a :class:`Spec`.
Every problem raises :class:`dpkit.base.errors.SpecError` with ``FILE: location — message``. The spec
layer depends on the registry and the protocols, never on the runner.
"""

from __future__ import annotations

from pathlib import Path

from dpkit.contract.registry import Registry

from dpkit.spec.cells import Cell, SweepError, cell_key, expand, grid, make_cell, set_path
from dpkit.spec.check import check_spec
from dpkit.spec.loader import deep_merge, parse_structure, read_yaml
from dpkit.spec.schema import (
    ComponentRef,
    MethodEntry,
    PrivacySettings,
    ReportSettings,
    Resources,
    Spec,
)


def parse_spec(raw: dict, path: str = "<spec>", *, registry: Registry) -> Spec:
    """Validate a spec mapping: structure first, then every expanded cell against ``registry``."""
    spec = parse_structure(raw, path)
    check_spec(spec, registry)
    return spec


def load_spec(path: str | Path, *, registry: Registry) -> Spec:
    """Read and fully validate the spec at ``path`` against ``registry``."""
    return parse_spec(read_yaml(path), str(path), registry=registry)


__all__ = [
    "Cell",
    "ComponentRef",
    "MethodEntry",
    "PrivacySettings",
    "ReportSettings",
    "Resources",
    "Spec",
    "SweepError",
    "cell_key",
    "check_spec",
    "deep_merge",
    "expand",
    "grid",
    "load_spec",
    "make_cell",
    "parse_spec",
    "parse_structure",
    "read_yaml",
    "set_path",
]
