"""A separate process acting on a budget store, for the concurrency and kill tests.

``python store_worker.py reserve STORE GO OUT N EPS`` prints ``ready``, waits for the file GO, reserves N pure
releases of ε = EPS for the output folder OUT and prints ``ok RUN`` or ``refused``;
``... hold STORE OUT`` reserves two cells, prints ``reserved RUN`` and sleeps (to be killed);
``... commits STORE OUT`` reserves, then commits cells as fast as it can (to be killed mid-way).
"""

import sys
import time
from pathlib import Path

from dpkit.accounting import DpGuarantee, guarantee_to_dict
from dpkit.budget.fingerprint import DatasetId
from dpkit.budget.store import BudgetStore, Request
from dpkit.base.errors import BudgetExceededError

DATASET = DatasetId("corpus", "sha256:worker-test", "a test corpus")


def spends(epsilon: float, count: int = 1) -> list[dict]:
    return [{"label": "release", "count": count,
             "guarantee": guarantee_to_dict(DpGuarantee.pure(epsilon))}]


def main(command: str, location: str, *rest: str) -> None:
    store = BudgetStore(location)
    if command == "reserve":
        go, out, n, eps = rest[0], rest[1], int(rest[2]), float(rest[3])
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.005)
        try:
            ids = store.reserve([Request(DATASET, "add_remove", {"cell": spends(eps, n)})], "w", out)
            print("ok", ids[DATASET.fingerprint], flush=True)
        except BudgetExceededError:
            print("refused", flush=True)
    elif command == "hold":
        ids = store.reserve([Request(DATASET, "add_remove", {"a": spends(1.0), "b": spends(1.0)})],
                            "w", rest[0])
        print("reserved", ids[DATASET.fingerprint], flush=True)
        time.sleep(600)
    elif command == "commits":
        planned = {f"cell{i}": spends(0.01) for i in range(5000)}
        run_id = store.reserve([Request(DATASET, "add_remove", planned)], "w", rest[0])[
            DATASET.fingerprint]
        print("reserved", run_id, flush=True)
        for i in range(5000):
            store.commit(run_id, f"cell{i}", spends(0.01))


if __name__ == "__main__":
    main(*sys.argv[1:])
