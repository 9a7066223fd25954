"""``dpkit data list|info|fetch``: the dataset and model catalogue and its cache."""

from __future__ import annotations

import json
import os
import sys

KINDS = ("dataset", "model")  # the kinds that load data or weights (see dpkit.contract.kinds)


def register(sub) -> None:
    """Add the ``data`` sub-command."""
    p = sub.add_parser("data", help="list, describe and fetch datasets and models")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    ls = actions.add_parser("list", help="table of datasets and models: name, kind, size, source")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=_list)
    info = actions.add_parser("info", help="details, params and cache state of one entry")
    info.add_argument("name", help="dataset or model name")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=_info)
    fetch = actions.add_parser("fetch", help="download, verify and unpack into the cache")
    fetch.add_argument("names", nargs="*", help="dataset or model names")
    fetch.add_argument("--all", action="store_true", help="every entry with a pinned artifact")
    fetch.add_argument("--json", action="store_true", help="machine-readable output")
    fetch.set_defaults(func=_fetch)


def describe(kind: str, entry) -> dict:
    """One catalogue record: name, kind, size, source, pinned artifact and cache state."""
    cls = entry.cls
    artifact = getattr(cls, "artifact", None)
    source = cls.source() if callable(getattr(cls, "source", None)) else getattr(cls, "source", "")
    record = {"name": entry.name, "component": kind, "kind": getattr(cls, "kind", kind),
              "size": getattr(cls, "size", ""), "source": source or f"plug-in {entry.plugin}",
              "plugin": entry.plugin, "summary": entry.summary}
    if artifact is not None:
        record.update(artifact=artifact.spec, registry=artifact.registry, sha256=artifact.sha256,
                      cached=artifact.is_cached(), cache_path=str(artifact.entry_dir()),
                      download_dir=str(artifact.download_dir()))
    return record


def catalogue() -> list[dict]:
    """Every registered dataset and model, described."""
    from dpkit.contract.plugins import get_registry

    registry = get_registry()
    return [describe(kind, registry.entries[kind][name])
            for kind in KINDS for name in registry.names(kind)]


def _entry(name: str):
    from dpkit.contract.plugins import get_registry

    entry = get_registry().find(name, KINDS)
    return entry.kind, entry


def _list(args) -> int:
    from tabulate import tabulate

    rows = catalogue()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [[r["name"], r["kind"], r["size"], r["source"],
              ("yes" if r["cached"] else "no") if "cached" in r else "-"] for r in rows]
    print(tabulate(table, headers=["name", "kind", "size", "source", "cached"],
                   maxcolwidths=[None, None, 34, 60, None]))
    print("\n" + "\n".join(where_dpkit_writes()))
    return 0


def where_dpkit_writes() -> list[str]:
    """The cache and the budget store: where they are, their size, how to move or turn them off."""
    from dpkit.base.cache import cache_root
    from dpkit.budget.store import STORE_ENV, default_location

    root = cache_root()
    size = _folder_size(root)
    held = f"{size / 1e6:,.0f} MB of" if size else "empty so far; it will hold"
    store = default_location()
    recorded = (f"budget store: {store} — every `dpkit run` records its privacy spends there; "
                f"{STORE_ENV}=PATH or an SQLAlchemy URL moves it, {STORE_ENV}=off stops recording"
                if store else f"budget store: off ({STORE_ENV}={os.environ.get(STORE_ENV)}): runs "
                "record no privacy spends")
    return [f"cache: {root} ({held} downloads, unpacked artifacts, trained models and shared "
            "results) — DPKIT_CACHE=DIR moves it, DPKIT_OFFLINE=1 never downloads", recorded]


def _folder_size(root) -> int:
    """Bytes of the files under ``root`` (links not followed; 0 if it does not exist)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass  # removed while we walked
    return total


def _info(args) -> int:
    kind, entry = _entry(args.name)
    record = describe(kind, entry)
    record["params"] = entry.cls.Params.model_json_schema().get("properties", {})
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    for key in ("name", "component", "kind", "summary", "size", "source", "artifact", "sha256",
                "cached", "cache_path", "download_dir", "plugin"):
        if key in record:
            print(f"{key + ':':14}{record[key]}")
    print("params:" if record["params"] else "params:       (none)")
    for field, schema in record["params"].items():
        print(f"  {field} (default {schema.get('default')!r}): {schema.get('description', '')}")
    return 0


def _fetch(args) -> int:
    from dpkit.base.errors import DataSourceError

    if args.all:
        names = [r["name"] for r in catalogue() if "artifact" in r]
    elif args.names:
        names = args.names
    else:
        print("error: name a dataset or model to fetch, or pass --all", file=sys.stderr)
        return 2
    results, status = [], 0
    for name in names:
        kind, entry = _entry(name)
        artifact = getattr(entry.cls, "artifact", None)
        if artifact is None:
            results.append({"name": name, "status": "nothing to fetch",
                            "source": describe(kind, entry)["source"]})
            continue
        try:
            path = artifact.fetch(progress=not args.json)
            results.append({"name": name, "status": "cached", "path": str(path),
                            "artifact": artifact.spec})
        except DataSourceError as exc:
            results.append({"name": name, "status": "failed", "error": str(exc)})
            status = 1
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            detail = r.get("path") or r.get("error") or r.get("source", "")
            print(f"{r['name']}: {r['status']} {detail}")
    return status
