"""A separate process acting on a budget store, for the concurrency and kill -9 tests.

``race STORE GO OUT`` prints ``ready``, waits for the file GO, reserves 3 pure releases of ε = 1
for the output folder OUT and prints ``ok RUN`` or ``refused``; once admitted it waits for GO.2
and charges one more ε = 1 beyond its reservation (as a retry's guard does): ``ok`` or ``refused``;
``hold STORE OUT`` reserves two cells, prints ``reserved RUN`` and sleeps (to be killed);
``step SPEC OUT N MARK`` runs SPEC with the toy plug-in and kills itself (SIGKILL) at its N-th
step — a write to the store (mid-transaction and just after it commits) or the return of a
``wire.send`` — writing ``crossed`` to MARK once a send has returned; it prints ``done`` if the run
had fewer steps.
"""

import os
import signal
import sys
import time
from pathlib import Path

from dpkit.accounting import DpGuarantee, guarantee_to_dict
from dpkit.base.errors import BudgetExceededError
from dpkit.budget.fingerprint import dataset_id
from dpkit.budget.store import BudgetStore, CellPlan
from dpkit.contract.plugins import get_registry
from dpkit.data.records import record_hashes

DATASET = dataset_id("corpus", record_hashes(f"a test document number {i}" for i in range(50)))


def spends(epsilon: float, count: int = 1, label: str = "release") -> list[dict]:
    return [{"label": label, "count": count,
             "guarantee": guarantee_to_dict(DpGuarantee.pure(epsilon))}]


def plans(**cells) -> dict[str, CellPlan]:
    return {key: CellPlan(DATASET, "add_remove", value) for key, value in cells.items()}


def _wait(go: str) -> None:
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.005)


def _steps(spec: str, out: str, kill_at: int, mark: str) -> None:
    from dpkit.budget import chain, store
    from dpkit.release import wire
    from dpkit.runner import run_spec
    from dpkit.spec import load_spec

    count = [0]

    def step() -> None:
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    append, leave, send = chain.append, store._Writing.__exit__, wire.Wire.send

    def appending(*args, **kwargs):
        step()  # killed inside the transaction: nothing of it may remain
        return append(*args, **kwargs)

    def leaving(self, *exc):
        result = leave(self, *exc)
        step()  # killed just after the transaction committed
        return result

    def sending(self, *args, **kwargs):
        received = send(self, *args, **kwargs)
        Path(mark).write_text("crossed")
        step()  # killed once the bytes crossed
        return received

    chain.append, store._Writing.__exit__, wire.Wire.send = appending, leaving, sending
    try:
        run_spec(load_spec(spec, registry=get_registry()), out, show_progress=False, registry=get_registry())
    except BudgetExceededError:
        print("refused", flush=True)
        return
    print("done", count[0], flush=True)


def main(command: str, *rest: str) -> None:
    if command == "step":
        _steps(rest[0], rest[1], int(rest[2]), rest[3])
        return
    store = BudgetStore(rest[0])
    if command == "race":
        go, out = Path(rest[1]), rest[2]
        _wait(str(go))
        try:
            run_id = store.reserve(plans(cell=spends(1.0, 3)), "w", out)
            print("ok", run_id, flush=True)
        except BudgetExceededError:
            print("refused", flush=True)
            return
        while not go.with_suffix(".2").exists():
            time.sleep(0.005)
        try:  # a spend beyond the reservation (a retry): the guard's charge
            store.charge(run_id, "cell", spends(1.0, label=f"retry {os.getpid()}")[0])
            print("ok", flush=True)
        except BudgetExceededError:
            print("refused", flush=True)
    elif command == "hold":
        run_id = store.reserve(plans(a=spends(1.0), b=spends(1.0)), "w", rest[1])
        store.charge(run_id, "a", spends(1.0)[0])
        print("reserved", run_id, flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:])
