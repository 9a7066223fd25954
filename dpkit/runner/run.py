"""``run_spec``: check a spec, lock its output folder, run the pending cells, write outputs."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from dpkit.base.results import CellResult
from dpkit.contract.registry import Registry
from dpkit.runner.executor import Executor, RetryPolicy
from dpkit.runner.lock import OutputLock
from dpkit.runner.preflight import preflight
from dpkit.runner.store import ResultStore
from dpkit.spec import Cell, Spec, check_spec


@dataclass
class RunOutcome:
    """What a run produced: rows of all finished cells, failures, and where files went."""

    out_dir: Path
    rows: list[CellResult]
    failures: list[tuple[Cell, str]] = field(default_factory=list)
    interrupted: bool = False
    ran: int = 0
    skipped: int = 0


class _StopFlag:
    """First SIGINT/SIGTERM: finish the cell in flight, then stop. Second SIGINT: abort now."""

    def __init__(self) -> None:
        self.stop = False
        self._old: dict = {}

    def __enter__(self) -> _StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.stop and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.stop = True
        print("\nstopping after the cell in flight (finished cells are saved; rerun the same "
              "command to resume; Ctrl-C again aborts now)", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def make_executor(name: str, registry: Registry, retries: int = 0,
                  address: str | None = None) -> Executor:
    """The executor called ``name`` (``local`` or ``ray``), both with the same retry policy.

    ``registry`` is used by the local executor; Ray workers build their own from the plug-ins
    installed on them (``DPKIT_*`` plug-in variables are forwarded).
    """
    policy = RetryPolicy(retries)
    if name == "local":
        from dpkit.runner.local import LocalExecutor

        return LocalExecutor(registry, policy)
    if name == "ray":
        from dpkit.runner.ray_executor import RayExecutor

        return RayExecutor(policy, address=address)
    raise ValueError(f"unknown executor {name!r}; use 'local' or 'ray'")


def run_spec(spec: Spec, out_dir: str | Path | None = None, *, fresh: bool = False,
             executor: str = "local", retries: int = 0, address: str | None = None,
             show_progress: bool = True, registry: Registry) -> RunOutcome:
    """Run every pending cell of ``spec``; results go to ``out_dir`` (default from the spec).

    Every cell is checked before any runs (:func:`dpkit.spec.check_spec`), and the guarantees
    that need the data on the first pending cell of each method
    (:func:`dpkit.runner.preflight.preflight`); the output folder is locked for the run
    (:class:`dpkit.runner.lock.OutputLock`: a second run refuses).
    """
    out = Path(out_dir) if out_dir else spec.output_dir()
    cells = check_spec(spec, registry)
    done = set() if fresh else set(ResultStore(out).rows)
    preflight(spec, [c for c in cells if c.key not in done], registry,
              say=lambda line: print(line, file=sys.stderr) if show_progress else None)
    runner = make_executor(executor, registry, retries=retries, address=address)
    with OutputLock(out):
        return _run_locked(spec, cells, out, runner, fresh, show_progress, registry)


def _run_locked(spec: Spec, cells: list[Cell], out: Path, runner: Executor, fresh: bool,
                show_progress: bool, registry: Registry) -> RunOutcome:
    from dpkit.runner.budget import reserve_run
    from dpkit.report import write_outputs

    store = ResultStore(out)
    if fresh:
        store.clear()
    pending = [c for c in cells if not store.done(c.key)]
    budget = reserve_run(spec, pending, out, registry)  # the budget store; refuses before any cell
    outcome = RunOutcome(out, [], skipped=len(cells) - len(pending))
    bar = tqdm(total=len(cells), initial=outcome.skipped, unit="cell", desc=spec.name,
               disable=not show_progress, dynamic_ncols=True)

    def on_result(cell: Cell, row: CellResult) -> None:
        budget.commit(cell.key, row)  # charged before it is released
        store.append(row)
        outcome.ran += 1
        bar.update(1)

    def on_failure(cell: Cell, error: str) -> None:
        store.record_failure(cell.key, cell.method, error)
        outcome.failures.append((cell, error))
        bar.write(f"cell {cell.key} ({cell.method} {cell.point or ''}) failed: {error}")
        bar.update(1)

    def progress(message: str) -> None:
        bar.set_postfix_str(message[:60], refresh=True)

    try:
        with _StopFlag() as flag:
            runner.run(pending, on_result, on_failure, lambda: flag.stop, progress)
            outcome.interrupted = flag.stop
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        bar.close()
        budget.finish()
    outcome.rows = [store.rows[c.key] for c in cells if store.done(c.key)]
    write_outputs(spec, cells, outcome.rows, out, registry)
    return outcome
