"""Cells: one (method, sweep point, seed) each, keyed by a hash of the resolved config."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dpkit.spec.schema import MethodEntry, Spec

if TYPE_CHECKING:
    from dpkit.contract.registry import Registry


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
    """Set ``a.b.0.c`` inside nested dicts/lists, creating dicts as needed.

    Raises :class:`SweepPathError` (a ValueError) when a list index is not a number or out of
    range, or when the path goes through a value that is neither a mapping nor a list.
    """
    parts = path.split(".")
    node: Any = target
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.lstrip("-").isdigit() or not -len(node) <= int(part) < len(node):
                raise SweepPathError(f"{'.'.join(parts[:i]) or 'the root'} is a list of "
                                     f"{len(node)}; {part!r} is not an index in 0..{len(node) - 1}")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise SweepPathError(f"{'.'.join(parts[:i])} is {type(node).__name__} {node!r}, not a "
                                 f"mapping; it has no key {part!r}")
        if last:
            node[part] = value
        else:
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]


class SweepPathError(ValueError):
    """A sweep path does not lead anywhere in the spec (bad list index, not a mapping)."""


class SweepError(ValueError):
    """A sweep point cannot be expanded; ``location`` is where in the spec (``sweep.<path>=v``)."""

    def __init__(self, location: str, message: str):
        self.location, self.message = location, message
        super().__init__(f"{location} — {message}")


def grid(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of a sweep mapping, in declaration order (one empty point if none)."""
    if not sweep:
        return [{}]
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def method_kind(entry: MethodEntry, location: str, registry: Registry) -> str:
    """'defense' or 'mechanism' for a method entry (explicit, by location, or by lookup)."""
    if entry.kind:
        return entry.kind
    if location in ("defense", "mechanism"):
        return location
    return registry.find(entry.name, ("defense", "mechanism")).kind


def expand(spec: Spec, registry: Registry) -> list[Cell]:
    """All cells of a spec: global sweep × each method's own sweep × seeds (the method's own
    ``seeds`` where it gives them, else the spec's).

    Raises :class:`SweepError` naming the sweep entry when a point cannot be applied.
    """
    base = spec.model_dump(exclude={"path"})  # python mode: η = .inf in params stays a float
    cells: list[Cell] = []
    for gpoint in grid(spec.sweep):
        rspec = _resolve_global(base, gpoint)
        for location, entry in rspec.methods():
            try:
                kind = method_kind(entry, location, registry)
            except KeyError as exc:  # ComponentNotFoundError
                raise SweepError(_swept_at(gpoint, f"{location}.name") or f"{location}.name",
                                 str(exc)) from None
            for mpoint in grid(entry.sweep):
                params = copy.deepcopy(entry.params)
                for path, value in mpoint.items():
                    try:
                        set_path(params, path, value)
                    except SweepPathError as exc:
                        raise SweepError(f"{location}.sweep.{path}", str(exc)) from None
                for seed in entry.seeds or rspec.seeds:
                    cells.append(make_cell(rspec, entry, kind, params, {**gpoint, **mpoint}, seed))
    unique: dict[str, Cell] = {}
    for cell in cells:  # a repeated sweep value gives the same cell: run it once
        unique.setdefault(cell.key, cell)
    return list(unique.values())


def _resolve_global(base: dict, gpoint: dict[str, Any]) -> Spec:
    """The spec with one global sweep point applied, validated again."""
    from pydantic import ValidationError

    resolved = copy.deepcopy(base)
    for path, value in gpoint.items():
        try:
            set_path(resolved, path, value)
        except SweepPathError as exc:
            raise SweepError(f"sweep.{path}", str(exc)) from None
    try:
        return Spec.model_validate(resolved)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        where = _swept_at(gpoint, loc) or f"sweep ({loc})"
        raise SweepError(where, f"{loc}: {err['msg'].removeprefix('Value error, ')}") from None


def _swept_at(gpoint: dict[str, Any], location: str) -> str | None:
    """``sweep.<path>=<value>`` for the global sweep entry that set ``location``, if any."""
    for path, value in gpoint.items():
        if location == path or location.startswith(path + ".") or path.startswith(location + "."):
            return f"sweep.{path}={value!r}"
    return None


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
