"""Cells: one (method, sweep point, seed) each, keyed by a hash of the resolved config."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from dpkit.spec import MethodEntry, Spec


@dataclass(frozen=True)
class Cell:
    """A fully resolved unit of work; ``key`` hashes everything that affects its result."""

    spec_name: str
    method: str
    kind: str
    component: str
    params: dict[str, Any]
    point: dict[str, Any]
    seed: int
    data: dict[str, Any]
    model: dict[str, Any] | None
    attacks: list[dict[str, Any]]
    evaluation: dict[str, Any]
    device: str
    privacy: dict[str, Any]
    resources: dict[str, Any] = field(default_factory=dict)
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (used to ship cells to workers)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Cell:
        """Inverse of :meth:`to_dict`."""
        return cls(**raw)


def set_path(target: dict, path: str, value: Any) -> None:
    """Set ``a.b.0.c`` inside nested dicts/lists, creating dicts as needed."""
    parts = path.split(".")
    node: Any = target
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            idx = int(part)
            if last:
                node[idx] = value
            else:
                node = node[idx]
            continue
        if last:
            node[part] = value
        else:
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]


def grid(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of a sweep mapping, in declaration order (one empty point if none)."""
    if not sweep:
        return [{}]
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def method_kind(entry: MethodEntry, location: str, registry) -> str:
    """'defense' or 'mechanism' for a method entry (explicit, by location, or by lookup)."""
    if entry.kind:
        return entry.kind
    if location in ("defense", "mechanism"):
        return location
    return registry.find(entry.name, ("defense", "mechanism")).kind


def expand(spec: Spec, registry) -> list[Cell]:
    """All cells of a spec: global sweep × each method's own sweep × seeds."""
    base = spec.model_dump(mode="json", exclude={"path"})
    cells: list[Cell] = []
    for gpoint in grid(spec.sweep):
        resolved = copy.deepcopy(base)
        for path, value in gpoint.items():
            set_path(resolved, path, value)
        rspec = Spec.model_validate(resolved)
        for location, entry in rspec.methods():
            kind = method_kind(entry, location, registry)
            for mpoint in grid(entry.sweep):
                params = copy.deepcopy(entry.params)
                for path, value in mpoint.items():
                    set_path(params, path, value)
                for seed in rspec.seeds:
                    cells.append(make_cell(rspec, entry, kind, params, {**gpoint, **mpoint}, seed))
    unique = {}
    for cell in cells:  # a repeated sweep value gives the same cell: run it once
        unique.setdefault(cell.key, cell)
    return list(unique.values())


def make_cell(spec: Spec, entry: MethodEntry, kind: str, params: dict, point: dict,
              seed: int) -> Cell:
    """Build a cell and compute its key."""
    cell = Cell(
        spec_name=spec.name,
        method=entry.display,
        kind=kind,
        component=entry.name,
        params=params,
        point=point,
        seed=seed,
        data=spec.data.model_dump(mode="json"),
        model=spec.model.model_dump(mode="json") if spec.model else None,
        attacks=[a.model_dump(mode="json") for a in spec.attacks],
        evaluation=dict(spec.evaluation) if kind == "mechanism" else {},
        device=spec.device,
        privacy=spec.privacy.model_dump(mode="json"),
        resources=spec.resources.model_dump(mode="json"),
    )
    return Cell(**{**cell.to_dict(), "key": cell_key(cell)})


def cell_key(cell: Cell) -> str:
    """16 hex digits of sha256 over the resolved config (device and resources excluded)."""
    raw = cell.to_dict()
    for skip in ("key", "device", "resources", "method"):
        raw.pop(skip, None)
    if raw["privacy"].get("neighboring") == "add_remove":  # the default keeps earlier keys
        raw["privacy"] = {k: v for k, v in raw["privacy"].items() if k != "neighboring"}
    blob = json.dumps(raw, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
