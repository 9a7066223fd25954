"""``run_spec``: check a spec, lock its output folder, run the pending cells, write outputs."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from dpkit.base.errors import BudgetExceededError, BudgetStoreError
from dpkit.base.results import CellResult
from dpkit.contract.registry import Registry
from dpkit.runner.executor import Executor, RetryPolicy
from dpkit.runner.lock import LOCK_NAME, OutputLock
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
    reference: dict | None = None  # reference.json: what the report needs besides the rows
    budget_store: str | None = None  # where this run's privacy spends were recorded, if anywhere


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


class _Refused(Exception):
    """The budget store refused the run at admission (carries the error to re-raise)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _remove_made(out: Path, made: list[Path], had_lock: bool) -> None:
    """Remove the lock file and the (empty) folders this run created before it was refused."""
    if not had_lock:
        (out / LOCK_NAME).unlink(missing_ok=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            break


FIRST_USE = """\
dpkit: recording this run's privacy spends in the budget store {where}
  (created now; every `dpkit run` adds its spends there, so a dataset's total ε counts every run
  on it: `dpkit budget status` lists them, `dpkit budget cap` caps a dataset). To move it, set
  DPKIT_BUDGET_STORE to a file or an SQLAlchemy URL; to stop recording, DPKIT_BUDGET_STORE=off."""


def _store_is_new() -> bool:
    """Whether the default budget store is an SQLite file that does not exist yet (this run will
    create it: then its first-use notice is printed)."""
    from dpkit.budget.store import default_location

    location = default_location()
    return location is not None and "://" not in location and not Path(location).expanduser().exists()


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
             show_progress: bool = True, registry: Registry,
             held: OutputLock | None = None) -> RunOutcome:
    """Run every pending cell of ``spec``; results go to ``out_dir`` (default from the spec).

    The output folder is locked first (:class:`dpkit.runner.lock.OutputLock`: a second run into
    it refuses at once, before any plug-in, data or model is loaded). Then every cell is checked
    before any runs (:func:`dpkit.spec.check_spec`), and the guarantees that need the data on the
    first pending cell of each method (:func:`dpkit.runner.preflight.preflight`). ``held``: the
    lock of ``out_dir`` already taken by the caller (``dpkit run`` takes it before it imports
    anything heavy).
    """
    out = Path(out_dir) if out_dir else spec.output_dir()
    made = [p for p in (out, *out.parents) if not p.exists()]  # folders the lock would create
    had_lock = (out / LOCK_NAME).exists()
    try:
        with contextlib.nullcontext() if held is not None and held.guards(out) else OutputLock(out):
            cells = check_spec(spec, registry)
            done = set() if fresh else set(ResultStore(out).rows)
            pending = [c for c in cells if c.key not in done]
            runner = make_executor(executor, registry, retries=retries, address=address)
            runner.prepare(pending)  # e.g. the fork server starts while preflight loads data
            preflight(spec, pending, registry,
                      say=lambda line: print(line, file=sys.stderr) if show_progress else None)
            return _run_locked(spec, cells, out, runner, fresh, show_progress, registry)
    except _Refused as refused:  # refused at admission: leave no output folder or lock behind
        _remove_made(out, made, had_lock)
        raise refused.error from None


def _run_locked(spec: Spec, cells: list[Cell], out: Path, runner: Executor, fresh: bool,
                show_progress: bool, registry: Registry) -> RunOutcome:
    from dpkit.runner.budget import reserve_run
    from dpkit.runner.secret import noise_secret
    from dpkit.report import write_outputs
    from dpkit.report.reference import measure_reference

    store = ResultStore(out)
    pending = [c for c in cells if fresh or not store.done(c.key)]
    first_use = _store_is_new()
    try:  # the budget store: verified, and every cap checked, before any cell
        budget = reserve_run(spec, pending, out, registry)
    except (BudgetExceededError, BudgetStoreError) as exc:
        raise _Refused(exc) from None
    if fresh:
        store.clear()
    runner.guard_for = budget.guard_for  # each attempt's ledger charges the store first
    runner.noise_secret = noise_secret(out, renew=fresh)  # type: ignore[attr-defined]
    outcome = RunOutcome(out, [], skipped=len(cells) - len(pending))
    if budget.store is not None:
        outcome.budget_store = budget.store.where
        if first_use:
            print(FIRST_USE.format(where=budget.store.where), file=sys.stderr, flush=True)
    bar = tqdm(total=len(cells), initial=outcome.skipped, unit="cell", desc=spec.name,
               disable=not show_progress, dynamic_ncols=True)

    def on_result(cell: Cell, row: CellResult) -> None:
        budget.commit(cell.key, row)  # charged before it is released
        store.append(row)
        outcome.ran += 1
        bar.update(1)

    def on_failure(cell: Cell, error: str) -> None:
        budget.fail(cell.key)  # what it charged stays charged
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
    if outcome.rows:  # measured here, where data and model are at hand; `dpkit report` reads it
        try:
            outcome.reference = measure_reference(spec, outcome.rows, registry)
        except Exception as exc:  # noqa: BLE001 — never lose a run's outputs to its reference
            print(f"warning: reference.json not written ({type(exc).__name__}: {exc}); the table "
                  "has no chance row and no scale for η", file=sys.stderr)
    write_outputs(spec, cells, outcome.rows, out, registry, outcome.reference)
    return outcome
