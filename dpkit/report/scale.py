"""The scale of a metric-DP guarantee: the median distance from a word to its nearest neighbour.

A metric-DP (dχ) guarantee of η per token bounds the privacy loss between two tokens x, x′ by
ε = η·d(x, x′); the number means nothing without a typical d. :func:`measure_scale` measures it
in the embedding space a run's guarantees name, once per space (kept in dpkit's cache beside the
artifacts) — at run time, when the model is at hand; the run writes it into its folder
(``reference.json``), so ``dpkit report`` never loads a model to say it again.
:func:`known_scale` only reads the cache.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from dpkit.contract.registry import Registry

from dpkit.base.cache import cache_root

SAMPLE = 2000
"""Words sampled (seeded) to estimate the median; their nearest neighbour is searched in the whole
vocabulary, so the estimate's only error is the sample's (±~2 % of the median at 2,000 words)."""


def median_nn_distance(vectors: torch.Tensor, sample: int = SAMPLE, seed: int = 0) -> float:
    """Median L2 distance from a word to its nearest other word, over a seeded sample of words."""
    table = vectors.detach().float().cpu()
    n = table.shape[0]
    if n < 2:
        raise ValueError(f"a space of {n} word(s) has no nearest neighbour")
    rows = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:sample]
    nearest = []
    for chunk in rows.split(256):
        dist = torch.cdist(table[chunk], table)
        dist[torch.arange(len(chunk)), chunk] = float("inf")  # not itself
        nearest.append(dist.min(dim=1).values)
    return float(torch.cat(nearest).median())


def _cache_path():
    return cache_root() / "artifacts" / "nn_distance.json"


def known_scale(space_name: str) -> float | None:
    """The median nearest-neighbour distance of ``space_name`` if dpkit's cache has it; never
    loads a model."""
    try:
        known = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return float(known[space_name]) if space_name in known else None


def measure_scale(space_name: str, model_ref: Any = None,
                  registry: Registry | None = None) -> float | None:
    """The median nearest-neighbour L2 distance of the space ``space_name`` (as the ledger names
    it): from the cache, else measured on the spec's model (``{name, params}``) if that model's
    space has this name; None when it cannot be measured here."""
    cached = known_scale(space_name)
    if cached is not None:
        return cached
    space = _load_space(model_ref, registry)
    if space is None or space.name != space_name:
        return None
    value = median_nn_distance(space.vectors)
    path = _cache_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({**known, space_name: value}, indent=1, sort_keys=True),
                       encoding="utf-8")
        os.replace(tmp, path)  # the cache is shared: never a half-written file
    except (OSError, ValueError):
        pass  # a read-only or damaged cache: measured again next time
    return value


def _load_space(model_ref: Any, registry: Registry | None) -> Any:
    """The spec model's embedding space (loaded once per process), or None."""
    if not model_ref or registry is None:
        return None
    from dpkit.contract.context import load_component

    try:
        model = load_component(registry, "model", model_ref["name"],
                               model_ref.get("params") or {}, torch.device("cpu"))
        space = model if hasattr(model, "vectors") else model.as_space()
    except Exception:  # noqa: BLE001 — the table says the scale is unknown rather than failing
        return None
    return space if hasattr(space, "vectors") and hasattr(space, "name") else None
