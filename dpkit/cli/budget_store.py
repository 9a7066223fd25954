"""``dpkit budget status|cap|lift|close|verify``: the persistent budget store of private datasets.

``dpkit budget status [DATASET]`` — overlaps, cap, every run that read its records, totals;
``dpkit budget cap DATASET --epsilon 8 --delta 1e-6 [--eta 50]`` — refuse what would pass it;
``dpkit budget lift DATASET --reason …`` — remove a cap (recorded);
``dpkit budget close RUN`` — settle a run whose process is gone;
``dpkit budget verify`` — check the store's hash-chained history.
The store is ``$DPKIT_BUDGET_STORE`` (a path or SQLAlchemy URL) or ``--store``; see docs/accounting.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from dpkit.base.errors import BudgetStoreError

RELATIONS = ("add_remove", "replace_one", "replace_special")


def register_store_commands(commands) -> None:
    """Add ``status``, ``cap``, ``lift``, ``close`` and ``verify`` to the ``budget`` commands."""
    status = commands.add_parser("status", help="what private datasets have spent, and their caps")
    status.add_argument("dataset", nargs="?", help="a dataset name or fingerprint prefix (default: all)")
    status.add_argument("--delta", type=float, help="δ to report ε at (default: the cap's, or 1e-5)")
    status.add_argument("--accountant", choices=("rdp", "pld"), default="rdp")
    _common(status)
    status.set_defaults(func=_status)

    cap = commands.add_parser("cap", help="cap a private dataset's budget, per notion")
    cap.add_argument("dataset", help="a stored dataset's name or fingerprint prefix, a registered "
                     "dataset name, or a local data file")
    cap.add_argument("--epsilon", type=float, help="(ε, δ)-DP cap ε (with --delta)")
    cap.add_argument("--delta", type=float)
    cap.add_argument("--eta", type=float, help="metric-DP (dχ) cap: η per token, summed over "
                     "every metric and space")
    cap.add_argument("--anonymity-epsilon", type=float, help="(k, ε)-anonymity cap ε")
    cap.add_argument("--neighboring", choices=RELATIONS, default="add_remove",
                     help="the relation the (ε, δ) cap is stated in")
    cap.add_argument("--raise", dest="raise_cap", action="store_true", help="allow loosening an "
                     "existing cap (needs --reason; recorded in the history)")
    cap.add_argument("--reason", default="", help="why (kept in the store's history)")
    _common(cap)
    cap.set_defaults(func=_cap)

    lift = commands.add_parser("lift", help="remove a dataset's cap (recorded, with a reason)")
    lift.add_argument("dataset")
    lift.add_argument("--reason", required=True)
    _common(lift)
    lift.set_defaults(func=_lift)

    close = commands.add_parser("close", help="settle a run whose process is gone")
    close.add_argument("run", type=int, help="the run id (dpkit budget status lists them)")
    _common(close)
    close.set_defaults(func=_close)

    verify = commands.add_parser("verify", help="check the store's hash-chained history")
    verify.add_argument("--expect-head", help="a head printed by an earlier verify (SEQ:HASH): "
                        "check the history still holds it")
    _common(verify)
    verify.set_defaults(func=_verify)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", help="a store path or SQLAlchemy URL (default: $DPKIT_BUDGET_STORE, "
                   "else a file under the dpkit cache)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _open(args) -> Any:
    from dpkit.budget.store import BudgetStore

    store = BudgetStore(args.store) if args.store else BudgetStore.default()
    if store is None:
        raise BudgetStoreError("the budget store is off ($DPKIT_BUDGET_STORE=off); pass --store")
    return store


def _status(args) -> int:
    from dpkit.budget.status import status_text, store_status

    store = _open(args)
    records = store_status(store, args.dataset, args.delta, args.accountant)
    if args.json:
        from dpkit.base.jsonutil import json_safe

        print(json.dumps(json_safe({"store": store.where, "datasets": records}), default=str))
    else:
        print(f"budget store: {store.where}")
        print("\n\n".join(status_text(r) for r in records) or "(no dataset charged yet)")
    return 0


def _dataset(name: str, store: Any) -> Any:
    """A DatasetId for ``name``: a stored dataset reached under that name (or fingerprint prefix),
    else a registered dataset (loaded and hashed with its default params), else a local file."""
    from dpkit.budget.fingerprint import DatasetId, DatasetIds
    from dpkit.budget.status import find_datasets
    from dpkit.contract.plugins import get_registry

    state = store.state()
    stored: list[dict[str, Any]] = []
    try:
        stored = find_datasets(state, name, store.where)
    except BudgetStoreError:
        pass
    if len(stored) > 1:
        options = "; ".join(f"{d['fingerprint'][:16]} ({d['records']:,} records, {d['basis']})"
                            for d in stored)
        raise BudgetStoreError(f"{len(stored)} record sets were read as {name!r}: {options}; "
                               "name one by its fingerprint prefix")
    if stored:
        row = stored[0]
        return DatasetId(row["name"], row["fingerprint"], row["basis"])
    registry = get_registry()
    if name in registry.names("dataset"):
        return DatasetIds(registry)({"name": name, "params": {}})
    readers = registry.providers("dataset", "reads_files")
    if Path(name).expanduser().exists() and readers:
        # the dataset that reads local files (dpkit.ReadsFiles)
        return DatasetIds(registry)({"name": readers[0].name,
                                     "params": {"path": str(Path(name).expanduser().resolve())}})
    raise BudgetStoreError(f"no dataset {name!r}: not in the budget store {store.where}, not a "
                           "registered dataset (dpkit data list), not a file")


def _cap(args) -> int:
    store = _open(args)
    dataset = _dataset(args.dataset, store)
    said = store.set_cap(dataset, args.neighboring, epsilon=args.epsilon, delta=args.delta,
                         eta=args.eta, anonymity_epsilon=args.anonymity_epsilon,
                         raise_cap=args.raise_cap, reason=args.reason)
    if args.json:
        print(json.dumps({"dataset": dataset.name, "fingerprint": dataset.fingerprint, **said}))
        return 0
    print(f"{said['act']} the cap of {dataset.short} in {store.where}; it governs:")
    print("\n".join(f"  {line}" for line in said["governs"]))
    print("  spends of any other notion on these records are refused until it is capped too")
    for warning in said["warnings"]:
        print(f"warning: {warning}")
    return 0


def _lift(args) -> int:
    store = _open(args)
    dataset = _dataset(args.dataset, store)
    store.lift_cap(dataset, args.reason)
    print(json.dumps({"dataset": dataset.name, "lifted": True}) if args.json else
          f"lifted the cap of {dataset.short} (recorded: {args.reason})")
    return 0


def _close(args) -> int:
    from dpkit.runner.budget import run_liveness

    store = _open(args)
    state = store.close(args.run, run_liveness)
    print(json.dumps({"run": args.run, "state": state}) if args.json else f"run {args.run}: {state}")
    return 0


def _verify(args) -> int:
    store = _open(args)
    report = store.verify(args.expect_head)
    print(json.dumps(report) if args.json else
          f"{store.where}: {report['entries']} entries verify (hash chain, head, record sets of "
          f"{report['datasets']} datasets); head {report['head']} — keep it to check later with "
          "--expect-head")
    return 0
