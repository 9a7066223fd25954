"""Relative file paths in a spec are read from the spec's own folder.

A component param that names a file or folder (``path``, or a name ending in ``_path``,
``_file`` or ``_dir``) given as a relative path is resolved against the folder of the YAML file
that states it (an ``include:``d file: its own folder), so a spec means the same data from any
working directory. ``paths_relative_to: cwd`` in a file keeps the older reading (from the
directory ``dpkit`` runs in) for that file. ``output:`` is not a read path: a run's output folder
stays relative to where you run (``runs/<name>`` by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SECTIONS = ("data", "model", "defense", "mechanism")
LISTS = ("baselines", "attacks")
SUFFIXES = ("_path", "_file", "_dir")


def is_path_param(name: str) -> bool:
    """Whether a param of this name holds a file or folder path."""
    return name == "path" or name.endswith(SUFFIXES)


def resolve_relative(raw: dict, folder: Path) -> dict:
    """``raw`` (one spec file's mapping) with relative path params resolved against ``folder``,
    unless it says ``paths_relative_to: cwd``."""
    if raw.get("paths_relative_to", "spec") != "spec":
        return raw
    out = dict(raw)
    for key in SECTIONS:
        if isinstance(out.get(key), dict):
            out[key] = _resolve_entry(out[key], folder)
    for key in LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_resolve_entry(e, folder) if isinstance(e, dict) else e for e in out[key]]
    return out


def _resolve_entry(entry: dict, folder: Path) -> dict:
    params = entry.get("params")
    if not isinstance(params, dict):
        return entry
    resolved = {k: _resolve(v, folder) if is_path_param(k) else v for k, v in params.items()}
    return {**entry, "params": resolved}


def _resolve(value: Any, folder: Path) -> Any:
    if not isinstance(value, str) or not value or "://" in value:
        return value
    path = Path(value)
    if path.is_absolute() or value.startswith("~"):
        return value
    return str((folder / path).resolve())
