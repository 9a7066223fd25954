"""Run a planted-bug battery: every bug, planted one at a time, must be caught by a check.

A check is an audit (``dpkit audit --defense`` / ``dpkit audit``, caught on FAIL or
LAW_MISMATCH) or a test function (caught when it raises ``AssertionError``). Each target's
checks first run on the unmodified code and must not catch anything there (a check that flags
correct code proves nothing about the bugs); then each bug is planted and the target's checks run
until one catches it. Example, for a plug-in's own defense::

    from dpkit.testing.battery import defense_audit, run_battery
    from dpkit.testing.planted import PlantedBug, scale_draws

    BUGS = [PlantedBug("noise ×¼", "noise scaled", "my_defense",
                       (scale_draws("my_plugin.noise", 0.25, site="sigma"),))]
    CHECKS = {"my_defense": [defense_audit("my_defense", {"target_epsilon": 2})]}

    def test_battery():
        result = run_battery(BUGS, CHECKS)
        assert result.all_caught, result.table()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dpkit.testing.params_contract import process_registry
from dpkit.testing.planted import BugOutcome, PlantedBug, mutation_scores


@dataclass(frozen=True)
class Check:
    """A named check; ``run()`` returns (caught, what it said)."""

    name: str
    run: Callable[[], tuple[bool, str]]


def defense_audit(defense, params: dict | None = None, *, canaries: int = 1000, runs: int = 1,
                  seed: int = 0, confidence: float = 0.95) -> Check:
    """The canary audit of a defense; caught on FAIL or LAW_MISMATCH."""
    def run() -> tuple[bool, str]:
        from dpkit.audit import Verdict, audit_defense

        report = audit_defense(defense, params, canaries=canaries, runs=runs, seed=seed,
                               confidence=confidence, registry=process_registry())
        return report.verdict in (Verdict.FAIL, Verdict.LAW_MISMATCH), report.one_line()
    return Check(f"audit --defense {defense} {params or {}}", run)


def mechanism_audit(mechanism: str, params: dict | None = None, *, samples: int = 4000,
                    seed: int = 0, confidence: float = 0.95) -> Check:
    """The mechanism audit; caught on FAIL or LAW_MISMATCH."""
    def run() -> tuple[bool, str]:
        from dpkit.audit import Verdict, audit

        report = audit(mechanism, params or {}, samples=samples, seed=seed, confidence=confidence,
                       registry=process_registry())
        return report.verdict in (Verdict.FAIL, Verdict.LAW_MISMATCH), report.one_line()
    return Check(f"audit {mechanism} {params or {}}", run)


def assertion_check(name: str, fn: Callable[[], None]) -> Check:
    """A test body; caught when it raises AssertionError."""
    def run() -> tuple[bool, str]:
        try:
            fn()
        except AssertionError as err:
            return True, f"AssertionError: {str(err)[:200]}"
        return False, "passed"
    return Check(name, run)


def contract_test(mechanism: str, params: dict, test: str) -> Check:
    """One ``MechanismContract`` test of ``mechanism`` (e.g. ``test_draws_are_independent``);
    caught when it fails, not when it skips."""
    def fn() -> None:
        import pytest

        from dpkit.testing.contracts import MechanismContract

        suite = type("Suite", (MechanismContract,), {"mechanism": mechanism, "params": params})()
        try:
            getattr(suite, test)()
        except pytest.skip.Exception:
            pass
    return assertion_check(f"test {test} ({mechanism})", fn)


def test_check(*node_ids: str) -> Check:
    """Tests of the repository (``tests/...`` node ids, run in this process by pytest so that
    the planted patch is in force); caught when one fails. Their modules are re-imported each
    time, so names they import bind to the code as it is now."""
    def run() -> tuple[bool, str]:
        import sys
        from pathlib import Path

        import pytest

        root = Path(__file__).resolve().parents[2]
        paths = [root / n.split("::")[0] for n in node_ids]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"test_check needs the repository's tests: {missing}")
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if file and Path(file).resolve() in paths:
                del sys.modules[name]
        code = pytest.main([str(root / n) for n in node_ids] + [
            "-qq", "-x", "--tb=no", "-p", "no:cacheprovider", "--no-header", "-W", "ignore",
            f"--rootdir={root}"])
        failed = code == pytest.ExitCode.TESTS_FAILED
        return failed, "a test fails" if failed else f"pytest exit {int(code)}"
    return Check(f"tests {' '.join(node_ids)}", run)


@dataclass
class BatteryResult:
    """Outcomes per bug, what the checks said on clean code, and the wall time."""

    outcomes: list[BugOutcome]
    clean: dict[str, list[str]] = field(default_factory=dict)
    false_alarms: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def all_caught(self) -> bool:
        """Every bug caught and no check flagged the clean code."""
        return not self.false_alarms and all(o.caught for o in self.outcomes)

    def table(self) -> str:
        """Markdown: one row per bug, then the mutation score per target."""
        rows = ["| target | planted bug | kind | caught by | s |", "|---|---|---|---|---|"]
        rows += [f"| `{o.bug.target}` | {o.bug.name} | {o.bug.kind} | "
                 f"{o.caught_by if o.caught else '**missed**'} | {o.seconds:.1f} |"
                 for o in self.outcomes]
        rows += ["", "| target | mutation score |", "|---|---|"]
        rows += [f"| `{t}` | {c}/{n} |" for t, (c, n) in mutation_scores(self.outcomes).items()]
        if self.false_alarms:
            rows += ["", "False alarms on clean code: " + "; ".join(self.false_alarms)]
        return "\n".join(rows)


def run_battery(bugs: Sequence[PlantedBug], checks: Mapping[str, Sequence[Check]], *,
                say: Callable[[str], None] | None = None) -> BatteryResult:
    """Run each target's checks on clean code, then each bug planted alone against them."""
    start = time.perf_counter()
    result = BatteryResult([])
    for target in sorted({b.target for b in bugs}):
        if not checks.get(target):
            raise ValueError(f"no checks for target {target!r}; give checks[{target!r}]")
        for check in checks[target]:
            caught, said = check.run()
            result.clean.setdefault(target, []).append(said)
            if caught:
                result.false_alarms.append(f"{check.name}: {said}")
    for bug in bugs:
        t0 = time.perf_counter()
        outcome = BugOutcome(bug, False, "")
        with bug.planted():
            for check in checks[bug.target]:
                caught, said = check.run()
                outcome.details.append(f"{check.name}: {said}")
                if caught:
                    outcome.caught, outcome.caught_by = True, check.name
                    break
        outcome.seconds = time.perf_counter() - t0
        if say:
            say(f"{bug.target}: {bug.name}: {'caught' if outcome.caught else 'MISSED'}")
        result.outcomes.append(outcome)
    result.seconds = time.perf_counter() - start
    return result
