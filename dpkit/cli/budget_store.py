"""``dpkit budget status|cap|close``: the persistent budget store of private datasets.

``dpkit budget status [DATASET]`` — every run charged, its spends, composed ε(δ) and δ(ε);
``dpkit budget cap DATASET --epsilon 8 --delta 1e-6`` — refuse runs that would pass it;
``dpkit budget close RUN`` — give back an open run's unspent reservation.
The store is ``$DPKIT_BUDGET_STORE`` (a path or SQLAlchemy URL) or ``--store``; see docs/accounting.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from dpkit.base.errors import BudgetStoreError


def register_store_commands(commands) -> None:
    """Add ``status``, ``cap`` and ``close`` to the ``budget`` sub-commands."""
    status = commands.add_parser("status", help="runs charged to private datasets, composed ε(δ)")
    status.add_argument("dataset", nargs="?", help="a dataset name or fingerprint prefix (default: all)")
    status.add_argument("--delta", type=float, help="δ to report ε at (default: the cap's, or 1e-5)")
    status.add_argument("--epsilon", type=float, help="ε to report δ at (default: the cap's)")
    status.add_argument("--accountant", choices=("rdp", "pld"), default="rdp")
    _common(status)
    status.set_defaults(func=_status)

    cap = commands.add_parser("cap", help="cap a private dataset's budget (ε at δ)")
    cap.add_argument("dataset", help="a registered dataset name, a local data file, or a stored "
                     "dataset's name / fingerprint prefix")
    cap.add_argument("--epsilon", type=float, required=True)
    cap.add_argument("--delta", type=float, required=True)
    cap.add_argument("--neighboring", choices=("add_remove", "replace_one", "replace_special"),
                     default="add_remove")
    cap.add_argument("--force", action="store_true", help="raise a cap, or cap a dataset that "
                     "already has charges (the filter then assumes the cap came first)")
    _common(cap)
    cap.set_defaults(func=_cap)

    close = commands.add_parser("close", help="end an open run, giving back unspent reservations")
    close.add_argument("run", type=int, help="the run id (dpkit budget status lists them)")
    _common(close)
    close.set_defaults(func=_close)


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
    from dpkit.budget.status import dataset_status, find_datasets, status_text

    store = _open(args)
    found = find_datasets(store, args.dataset)
    records = [dataset_status(store, d, args.delta, args.epsilon, args.accountant) for d in found]
    if args.json:
        from dpkit.base.jsonutil import json_safe

        print(json.dumps(json_safe({"store": store.where, "datasets": records}), default=str))
    else:
        print(f"budget store: {store.where}")
        print("\n\n".join(status_text(r) for r in records) or "(no dataset charged yet)")
    return 0


def _dataset(name: str, store: Any) -> Any:
    """A DatasetId for ``name``: stored, registered, or a local data file."""
    from dpkit.budget.fingerprint import DatasetId, identify
    from dpkit.budget.status import find_datasets
    from dpkit.contract.plugins import get_registry

    registry = get_registry()
    if name in registry.names("dataset"):
        return identify(registry.build("dataset", name, {}), name)
    readers = registry.providers("dataset", "reads_files")
    if Path(name).expanduser().exists() and readers:
        entry = readers[0]  # the dataset that reads local files (dpkit.ReadsFiles)
        component = entry.cls(entry.params.model_construct(path=str(Path(name).expanduser())))
        return identify(component, entry.name)
    row = find_datasets(store, name)[0]
    return DatasetId(row["name"], row["fingerprint"], row["basis"])


def _cap(args) -> int:
    store = _open(args)
    dataset = _dataset(args.dataset, store)
    store.set_cap(dataset, args.neighboring, args.epsilon, args.delta, force=args.force)
    record = {"dataset": dataset.name, "fingerprint": dataset.fingerprint,
              "neighboring": args.neighboring, "epsilon": args.epsilon, "delta": args.delta}
    print(json.dumps(record) if args.json else
          f"capped {dataset.short} ({args.neighboring}) at ε = {args.epsilon:g} at δ = "
          f"{args.delta:g} in {store.where}")
    return 0


def _close(args) -> int:
    store = _open(args)
    state = store.close(args.run)
    print(json.dumps({"run": args.run, "state": state}) if args.json else f"run {args.run}: {state}")
    return 0
