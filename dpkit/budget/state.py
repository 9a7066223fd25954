"""The store's state, rebuilt by replaying its verified log (:mod:`dpkit.budget.chain`).

Datasets are record sets linked by their overlaps; a cap belongs to one dataset; a run reserves
each of its cells' planned spends against the cell's dataset and relation; charges are what each
cell's ledger recorded (write-ahead, before the release); a cell ends ``done`` or ``failed`` in a
live process, or is settled when its run is closed after the process died. What a cell counts
against a cap (:meth:`CellState.counted`) is its charges plus — while its run is open, or when it
was settled as spent — the planned spends no charge has matched yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dpkit.budget.chain import Entry


def spend_key(spend: dict[str, Any]) -> str:
    """A spend's identity for matching a charge to its reservation (label, count, guarantee)."""
    return json.dumps([spend["label"], int(spend["count"]), spend["guarantee"]], sort_keys=True)


@dataclass
class Cap:
    """One dataset's cap: (ε, δ) in a relation, η per token, (k, ε) ε; None = that notion uncapped."""

    relation: str
    epsilon: float | None = None
    delta: float | None = None
    eta: float | None = None
    anonymity_epsilon: float | None = None

    def governs(self) -> list[str]:
        """The notions this cap counts, in words."""
        out = []
        if self.epsilon is not None:
            out.append(f"(ε, δ)-DP: ε = {self.epsilon:g} at δ = {self.delta:g} ({self.relation} "
                       "neighbours; other relations converted or refused)")
        if self.eta is not None:
            out.append(f"metric DP (dχ): η = {self.eta:g} per token, summed over every metric, "
                       "space and unit")
        if self.anonymity_epsilon is not None:
            out.append(f"(k, ε)-anonymity: ε = {self.anonymity_epsilon:g}")
        return out


@dataclass
class CellState:
    """One cell of a run: its dataset, relation, reservation, charges and how it ended."""

    dataset: str
    relation: str
    reserved: list[dict[str, Any]]
    charges: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    ended: str | None = None  # done | failed | spent | released

    def counted(self) -> list[dict[str, Any]]:
        """The spends this cell counts against a cap now."""
        held = self.unmatched if self.ended in (None, "spent") else []
        return self.charges + held


@dataclass
class RunState:
    """One ``dpkit run``: its spec, output folder, process and cells."""

    id: int
    spec: str
    out_dir: str
    host: str
    pid: int
    started: str
    cells: dict[str, CellState]
    state: str = "open"
    settled_by: str | None = None


@dataclass
class State:
    """Everything the log says: datasets, their overlaps and caps, runs and their cells."""

    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)
    overlaps: dict[str, dict[str, int]] = field(default_factory=dict)
    caps: dict[str, Cap] = field(default_factory=dict)
    cap_history: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[int, RunState] = field(default_factory=dict)

    def linked(self, dataset: str) -> list[str]:
        """``dataset`` and every stored dataset sharing a record with it."""
        return [dataset] + [d for d, n in self.overlaps.get(dataset, {}).items() if n != 0]

    def cells_reading(self, dataset: str) -> list[tuple[RunState, str, CellState]]:
        """Every cell of every run whose dataset shares a record with ``dataset``."""
        near = set(self.linked(dataset))
        return [(r, key, c) for r in self.runs.values() for key, c in r.cells.items()
                if c.dataset in near]

    def apply(self, entry: Entry) -> None:
        """Replay one entry."""
        getattr(self, f"_{entry.kind}")(entry.body, entry)

    def _dataset(self, body: dict[str, Any], entry: Entry) -> None:
        fp = body["id"]
        self.datasets[fp] = {"fingerprint": fp, "name": body["name"], "names": [body["name"]],
                             "basis": body["basis"], "records": body["records"], "created": entry.at,
                             "legacy": bool(body.get("legacy"))}
        self.overlaps.setdefault(fp, {})
        for other, n in body["overlaps"].items():
            self._link(fp, other, n)
        self._link_legacy(fp, body["name"])

    def _alias(self, body: dict[str, Any], entry: Entry) -> None:
        names = self.datasets[body["id"]]["names"]
        if body["name"] not in names:
            names.append(body["name"])
        self._link_legacy(body["id"], body["name"])

    def _link(self, a: str, b: str, n: int) -> None:
        self.overlaps.setdefault(a, {})[b] = n
        self.overlaps.setdefault(b, {})[a] = n

    def _link_legacy(self, fp: str, name: str) -> None:
        """A schema-1 dataset shares its budget with every dataset reached under its name (-1)."""
        for other, meta in self.datasets.items():
            if other != fp and name in meta["names"] and (meta["legacy"]
                                                          or self.datasets[fp]["legacy"]):
                self._link(fp, other, self.overlaps.get(fp, {}).get(other) or -1)

    def _cap(self, body: dict[str, Any], entry: Entry) -> None:
        self.cap_history.append({**body, "at": entry.at, "seq": entry.seq})
        if body["act"] == "lift":
            self.caps.pop(body["id"], None)
        else:
            self.caps[body["id"]] = Cap(body["relation"], body.get("epsilon"), body.get("delta"),
                                        body.get("eta"), body.get("anonymity_epsilon"))

    def _run(self, body: dict[str, Any], entry: Entry) -> None:
        cells = {k: CellState(c["dataset"], c["relation"], list(c["spends"] or []),
                              unmatched=list(c["spends"] or [])) for k, c in body["cells"].items()}
        self.runs[body["run"]] = RunState(body["run"], body["spec"], body["out_dir"], body["host"],
                                          body["pid"], entry.at, cells)

    def _charge(self, body: dict[str, Any], entry: Entry) -> None:
        cell = self.runs[body["run"]].cells[body["cell"]]
        cell.charges.append(body["spend"])
        key = spend_key(body["spend"])
        for i, planned in enumerate(cell.unmatched):
            if spend_key(planned) == key:
                del cell.unmatched[i]
                break

    def _end(self, body: dict[str, Any], entry: Entry) -> None:
        self.runs[body["run"]].cells[body["cell"]].ended = body["outcome"]

    def _settle(self, body: dict[str, Any], entry: Entry) -> None:
        run = self.runs[body["run"]]
        for key, outcome in body["cells"].items():
            run.cells[key].ended = outcome
        run.state, run.settled_by = body["state"], body["by"]

    def _migrated(self, body: dict[str, Any], entry: Entry) -> None:
        """A run carried over from a schema-1 store: closed, every charge spent."""
        cells = {k: CellState(c["dataset"], c["relation"], [], list(c["spends"]), [], "done")
                 for k, c in body["cells"].items()}
        self.runs[body["run"]] = RunState(body["run"], body["spec"], body["out_dir"], "", 0,
                                          entry.at, cells, "closed", "migration")


def replay(entries: list[Entry]) -> State:
    """The state after every entry."""
    state = State()
    for entry in entries:
        state.apply(entry)
    return state
