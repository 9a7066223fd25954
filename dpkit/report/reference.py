"""What a run's report needs besides its rows, measured when the run ends and kept in its folder
(``reference.json``), and the table's reference rows built from it.

``dpkit report`` re-renders a folder without running a cell, without the cache and without a
network, so anything the table says that the rows do not hold is measured at run time, while the
data and model are at hand: the scale of each embedding space a metric-DP guarantee names (the
median distance from a word to its nearest neighbour, :mod:`dpkit.report.scale`) and the labels
of the evaluated split (the share of its most common label: the accuracy of always giving that
answer). The reference rows frame the methods: **no noise** (the cells' own ``clean_<metric>``:
the same evaluation on the text before privatization, the ceiling) and **chance** (the cells' own
``chance_<metric>`` where they report one — on exactly the texts they scored; else always the
most common label of the evaluated split for accuracy, AUC 0.5 for any score that ignores the
text, an attack's own ``<name>_majority`` for its ``<name>_accuracy``: the floor).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpkit.base.results import as_results
from dpkit.evidence import summarize
from dpkit.report.scale import known_scale, measure_scale

if TYPE_CHECKING:
    from dpkit.base.results import CellResult

FILE = "reference.json"
FORMAT = "dpkit-run-reference/1"
CLEAN, CHANCE = "no noise (reference)", "chance (reference)"
CHANCE_AUC = 0.5  # the AUC of any score that ignores its input, whatever the labels


def metric_dp_spaces(rows: list[CellResult]) -> list[str]:
    """The embedding spaces the rows' metric-DP spends are stated in."""
    return sorted({s["guarantee"].get("space") or "" for r in rows
                   for s in r.ledger.get("spends", [])
                   if s.get("guarantee", {}).get("notion") == "metric_dp"} - {""})


def measure_reference(spec: Any, rows: list[CellResult], registry: Any) -> dict:
    """The reference of a finished run: space scales and label counts (loads data and model if
    this process does not hold them yet; call it where the run had them)."""
    rows = as_results(rows)
    model = spec.model.model_dump(mode="json") if spec.model is not None else None
    spaces = {}
    for space in metric_dp_spaces(rows):
        value = measure_scale(space, model, registry)
        if value is not None:
            spaces[space] = value
    from dpkit.budget.summary import recorded_datasets

    return {"format": FORMAT, "spaces": spaces, "labels": _label_counts(spec, rows, registry),
            "datasets": recorded_datasets(spec, rows, registry)}


def _label_counts(spec: Any, rows: list[CellResult], registry: Any) -> list[dict]:
    """Per distinct data ref of the rows: the evaluated split's size and label counts."""
    import torch

    from dpkit.contract.context import load_component

    refs = {json.dumps(r.data or spec.data.model_dump(mode="json"), sort_keys=True)
            for r in rows}
    evaluation = spec.evaluation if spec.mechanism is not None else {}
    split_name, cap = evaluation.get("split", "test"), evaluation.get("max_docs")
    out = []
    for ref in sorted(refs):
        data = json.loads(ref)
        try:
            dataset = load_component(registry, "dataset", data["name"],
                                     data.get("params") or {}, torch.device("cpu"))
            labels = dataset.splits[split_name].labels
        except Exception:  # noqa: BLE001 — no labels, no chance row; the table says nothing
            continue
        if not labels:
            continue
        labels = labels[:cap] if cap else labels
        names = getattr(dataset, "label_names", None) or ()
        counts = Counter(names[i] if i < len(names) else str(i) for i in labels)
        top, top_n = counts.most_common(1)[0]
        out.append({"data": data, "split": split_name, "n": len(labels), "counts": dict(counts),
                    "majority": top, "majority_share": top_n / len(labels)})
    return out


def write_reference(reference: dict, path: Path) -> None:
    """``reference.json``."""
    path.write_text(json.dumps(reference, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_reference(folder: Path) -> dict | None:
    """A run folder's ``reference.json``; None for folders written before it existed."""
    try:
        doc = json.loads((Path(folder) / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def space_scales(rows: list[CellResult], reference: dict | None) -> dict[str, float]:
    """The scale of every space the rows name: from the run's reference, else from dpkit's cache
    (never by loading a model)."""
    kept = (reference or {}).get("spaces", {})
    scales = {}
    for space in metric_dp_spaces(rows):
        value = kept.get(space, known_scale(space))
        if value is not None:
            scales[space] = float(value)
    return scales


def reference_rows(rows: list[CellResult], shown: list[str], reference: dict | None
                   ) -> list[tuple[str, dict[str, Any]]]:
    """(label, {metric: Summary or number}) of the no-noise and chance rows, for the metrics shown
    that have one; rows without any value are left out."""
    rows = as_results(rows)
    clean = {m: _per_seed(rows, f"clean_{m}") for m in shown}
    chance: dict[str, Any] = {}
    labels = (reference or {}).get("labels") or []
    for m in shown:
        own = _per_seed(rows, f"chance_{m}")  # a cell's own chance level, on what it scored
        if own is not None:
            chance[m] = own
        elif m == "accuracy" and len(labels) == 1:
            chance[m] = labels[0]["majority_share"]
        elif m == "auc":
            chance[m] = CHANCE_AUC
        elif m.endswith("_accuracy"):
            chance[m] = _per_seed(rows, m[: -len("accuracy")] + "majority")
    out = [(label, {m: v for m, v in values.items() if v is not None})
           for label, values in ((CLEAN, clean), (CHANCE, chance))]
    return [(label, values) for label, values in out if values]


def reference_agg(rows: list[CellResult], metrics: list[str], reference: dict | None) -> list[dict]:
    """The reference rows as rows of :func:`dpkit.report.aggregate` without a sweep point (the
    plot draws them as dashed levels)."""
    out = []
    for label, values in reference_rows(rows, metrics, reference):
        stats = {m: v for m, v in values.items() if hasattr(v, "n")}
        out.append({"method": label, "point": {}, "seeds": 0, "uncovered": [], "stats": stats,
                    "values": {m: v.mean if hasattr(v, "n") else float(v)
                               for m, v in values.items()}})
    return out


def _per_seed(rows: list[CellResult], metric: str) -> Any:
    """A :class:`dpkit.evidence.Summary` over seeds of ``metric`` (each seed's mean over its
    cells), or None where no cell reports it."""
    by_seed: dict[Any, list[float]] = {}
    for r in rows:
        value = r.metrics.get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            by_seed.setdefault(r.seed, []).append(float(value))
    if not by_seed:
        return None
    return summarize([sum(v) / len(v) for v in by_seed.values()])


def reference_note(refs: list[tuple[str, dict[str, Any]]], reference: dict | None) -> str:
    """What each reference row is, in words."""
    if not refs:
        return ""
    parts = []
    for label, values in refs:
        if label == CLEAN:
            parts.append("no noise — the same evaluation on the text before privatization "
                         f"({', '.join(f'clean_{m}' for m in values)}), the ceiling")
            continue
        said = [f"{m}: chance_{m}, the cells' own chance level" for m, v in values.items()
                if hasattr(v, "n") and not m.endswith("_accuracy")]
        labels = (reference or {}).get("labels") or []
        if "accuracy" in values and labels and not hasattr(values["accuracy"], "n"):
            lab = labels[0]
            said.append(f"accuracy of always answering the most common label, {lab['majority']!r} "
                        f"({round(lab['majority_share'] * lab['n'])} of the {lab['n']:,} "
                        f"{lab['split']} texts)")
        if "auc" in values:
            said.append(f"AUC {CHANCE_AUC:g} of any score that ignores the text")
        said += [f"{m}: the attack's own majority-class guess" for m in values
                 if m.endswith("_accuracy") and m != "accuracy"]
        parts.append("chance — " + "; ".join(said) + ", the floor")
    return ("Reference rows (not methods): " + "; ".join(parts) + ". – in a reference row: not "
            "defined for it.")
