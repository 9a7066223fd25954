"""Shrink a committed spec mechanically to one that runs in seconds, keeping its structure.

A :class:`Shrink` names what changes: the data and model (tiny, generated, offline), per-component
params merged into every method that runs that component, per-attack params, evaluation
settings, which sweep values to keep and which to rename. Everything else — the defense, every
baseline, the attacks, the privacy settings and the claims — stays as the spec has it. Every
method runs the same seeds: two by default, the fewest a claim's paired interval accepts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dpkit.spec.loader import read_yaml

#: the plug-in modules the tiny data and spaces come from (``DPKIT_EXTRA_PLUGINS``), which a
#: server in its own process loads by name as the client does
TINY_PLUGINS = "testing_data=dpkit.testing.textdata,toy=dpkit.testing.toy"


@dataclass(frozen=True)
class Shrink:
    """What :func:`shrink_spec` replaces in a spec; the rest of the spec is kept."""

    data: dict[str, Any]
    model: dict[str, Any] | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)   # by component name
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # by attack name
    evaluation: dict[str, Any] = field(default_factory=dict)
    keep: dict[str, list[Any]] = field(default_factory=dict)  # sweep axis -> values kept
    # a swept value the tiny data cannot take (300 queries of a 27-word vocabulary) -> the one it
    # becomes, everywhere the spec names it: sweeps, methods' params, claims' where and points
    rename: dict[str, dict[Any, Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1)


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in, nested mappings merged key by key — except a
    component's params (``params``, ``*_params``), replaced whole: they belong to the component
    the override names, which is another one (a tiny dataset for a real one)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        replaced = isinstance(key, str) and (key == "params" or key.endswith("_params"))
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not replaced:
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def kept_sweep(sweep: dict[str, list[Any]], keep: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Each swept axis cut to the values ``keep`` names (its first value where it names none of
    them), so that every method keeps at least one cell and methods stay paired on kept points."""
    out = {}
    for axis, values in sweep.items():
        if axis not in keep:
            out[axis] = list(values)
            continue
        chosen = [v for v in values if v in keep[axis]]
        out[axis] = chosen or list(values[:1])
    return out


def renamed(values: dict[str, Any], rename: dict[str, dict[Any, Any]]) -> dict[str, Any]:
    """``values`` (axis -> value, or axis -> list of values) with the renamed values replaced."""
    out = dict(values)
    for axis, table in rename.items():
        if isinstance(out.get(axis), list):
            out[axis] = [table.get(v, v) for v in out[axis]]
        elif axis in out:
            out[axis] = table.get(out[axis], out[axis])
    return out


def shrink_method(method: dict[str, Any], shrink: Shrink) -> dict[str, Any]:
    """One method entry (defense, mechanism or baseline) with its component's overrides."""
    out = copy.deepcopy(method)
    params = merged(out.get("params") or {}, shrink.params.get(out["name"], {}))
    out["params"] = renamed(params, shrink.rename)
    if out.get("sweep"):
        out["sweep"] = renamed(kept_sweep(out["sweep"], shrink.keep), shrink.rename)
    out.pop("seeds", None)
    return out


def shrink_claim(claim: dict[str, Any], shrink: Shrink) -> dict[str, Any]:
    """A claim with the renamed values of its ``where`` and, on its ``over`` axis, its ``points``."""
    out = copy.deepcopy(claim)
    if out.get("where"):
        out["where"] = renamed(out["where"], shrink.rename)
    if out.get("points") and out.get("over") in shrink.rename:
        table = shrink.rename[out["over"]]
        out["points"] = [table.get(v, v) for v in out["points"]]
    return out


def shrink_spec(raw: dict[str, Any], shrink: Shrink) -> dict[str, Any]:
    """The spec mapping ``raw`` shrunk by ``shrink``: its seeds, on the CPU, no output folder."""
    out = copy.deepcopy(raw)
    out["data"] = copy.deepcopy(shrink.data)
    if shrink.model is not None:
        out["model"] = copy.deepcopy(shrink.model)
    for key in ("defense", "mechanism"):
        if out.get(key):
            out[key] = shrink_method(out[key], shrink)
    out["baselines"] = [shrink_method(b, shrink) for b in out.get("baselines") or []]
    out["attacks"] = [{**a, "params": merged(a.get("params") or {}, shrink.attacks.get(a["name"], {}))}
                      for a in out.get("attacks") or []]
    out["claims"] = [shrink_claim(c, shrink) for c in out.get("claims") or []]
    if shrink.evaluation:
        out["evaluation"] = merged(out.get("evaluation") or {}, shrink.evaluation)
    out["seeds"] = list(shrink.seeds)
    out["device"] = "cpu"
    out.pop("output", None)
    return out


def write_small_spec(spec_path: str | Path, shrink: Shrink, folder: Path) -> Path:
    """The spec at ``spec_path`` (its ``include:`` files resolved) shrunk and written into
    ``folder``; returns the new file's path."""
    raw = read_yaml(spec_path)
    raw.pop("include", None)
    path = folder / Path(spec_path).name
    path.write_text(yaml.safe_dump(shrink_spec(raw, shrink), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
    return path
