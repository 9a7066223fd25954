"""Mutation testing of dpkit's privacy-critical code with mutmut: one module at a time, each
against its own explicitly listed privacy tests, equivalent mutants subtracted with their reasons.

    python tools/mutation.py                       every module of tools/mutation.toml
    python tools/mutation.py dpkit/text/noise.py   one module (or several)
    python tools/mutation.py --changed-since REF   only modules (and functions) changed since REF
    python tools/mutation.py --list                the modules and their tests

Each module runs in its own scratch copy under build/mutation/ (mutmut's ``mutants/`` lives
there; the working tree is never modified), niced, one mutant at a time, with torch limited to one
thread and mutmut's fork server (torch is not fork-safe). A mutant counts as killed when its
module's tests fail or time out; a surviving mutant must be listed in
tools/equivalent_mutants.toml (function, the mutated line, a one-line reason) or the run fails.
Prints one line per module: mutants, killed, equivalent, survived, score (killed-or-justified).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tools" / "mutation.toml"
EQUIVALENT = ROOT / "tools" / "equivalent_mutants.toml"
SCRATCH = ROOT / "build" / "mutation"
KILLED = {"killed", "timeout", "caught by type check"}
CHILD_HITS = "hooks"


@dataclass
class Module:
    """A privacy-critical file and the tests that must kill its mutants."""

    path: str
    tests: list[str]
    only_functions: set[str] | None = None
    only_mutants: list[str] | None = None
    enforced: bool = False


@dataclass
class Score:
    """Outcome of one module's mutants."""

    path: str
    statuses: dict[str, str] = field(default_factory=dict)
    equivalent: dict[str, str] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    partial: bool = False
    note: str = ""

    @property
    def killed(self) -> int:
        """Mutants the tests killed (failed or timed out)."""
        return sum(s in KILLED for s in self.statuses.values())

    @property
    def score(self) -> float:
        """Killed or justified, over all mutants."""
        total = len(self.statuses)
        return (self.killed + len(self.equivalent)) / total if total else 1.0

    def line(self) -> str:
        """One line: module, mutants, killed, equivalent, survived, score, seconds."""
        return (f"{self.path:42s} {len(self.statuses):5d} mutants  {self.killed:5d} killed  "
                f"{len(self.equivalent):3d} equivalent  {len(self.survivors):3d} survived  "
                f"{100 * self.score:6.1f} %  ({self.seconds:.0f} s"
                + (", stopped at the time budget)" if self.partial else ")")
                + (f"\n    {self.note}" if self.note else ""))


def load_modules() -> list[Module]:
    """The modules of tools/mutation.toml, in order."""
    data = tomllib.loads(CONFIG.read_text())
    return [Module(path, list(entry["tests"]),
                   set(entry["functions"]) if "functions" in entry else None,
                   enforced=bool(entry.get("enforced", False)))
            for path, entry in data["modules"].items()]


def load_equivalents() -> dict[str, list[dict]]:
    """Equivalent mutants per module: dicts with ``function``, ``line`` and ``reason``."""
    if not EQUIVALENT.exists():
        return {}
    data = tomllib.loads(EQUIVALENT.read_text())
    out: dict[str, list[dict]] = {}
    for entry in data.get("mutant", []):
        out.setdefault(entry["module"], []).append(entry)
    return out


def _module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[1:] if parts[0] == "plugins" else parts)


def prepare(module: Module) -> Path:
    """A scratch copy of the sources and tests with a [tool.mutmut] for ``module``."""
    work = SCRATCH / module.path.replace("/", "__")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    packages = ["dpkit", *sorted(p.name for p in (ROOT / "plugins").glob("dpkit_*") if p.is_dir())]
    for name in packages:  # plug-ins at the top level: mutmut names modules by their path
        shutil.copytree(ROOT / ("" if name == "dpkit" else "plugins") / name, work / name,
                        ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    example_tests = "examples/dpkit-example-plugin/tests"  # tests/conftest.py checks SMOKE's paths
    shutil.copytree(ROOT / example_tests, work / example_tests, ignore=ignore)
    pytest_section = re.search(r"\[tool\.pytest\.ini_options\].*?(?=\n\[)", (ROOT / "pyproject.toml")
                               .read_text(), re.S)
    assert pytest_section, "pyproject.toml has no [tool.pytest.ini_options]"
    settings = pytest_section.group(0).replace('testpaths = ["tests", "examples/dpkit-example-plugin/tests"]',
                                               'testpaths = ["tests"]')
    mutmut = ["[tool.mutmut]", f"source_paths = {packages!r}",
              f"only_mutate = [{_scratch_path(module.path)!r}]",
              f"pytest_add_cli_args_test_selection = {module.tests!r}",
              'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q", "-p", "no:randomly", '
              '"-p", "mutation_hooks"]',
              'process_isolation = "forkserver"', "timeout_multiplier = 10.0",
              "timeout_constant = 30.0", "use_git_change_detection = false",
              f"also_copy = [{example_tests!r}]"]
    (work / "pyproject.toml").write_text(settings + "\n\n" + "\n".join(mutmut) + "\n")
    hooks = work / CHILD_HITS  # a server process's trampoline hits (tools/mutation_hooks.py)
    hooks.mkdir()
    shutil.copy(ROOT / "tools" / "mutation_hooks.py", hooks)
    (hooks / "sitecustomize.py").write_text("from mutation_hooks import install_in_child\n\n"
                                            "install_in_child()\n")
    return work


def _scratch_path(path: str) -> str:
    """Where ``path`` lies in the scratch copy (plug-ins at the top level)."""
    return path.removeprefix("plugins/")


def _env(work: Path) -> dict[str, str]:
    """Settings of mutmut's processes, and of the children they start (a cell's server): the
    child-hits hooks on their path, so that the stats see which tests reach a server's code."""
    hooks = str(work / CHILD_HITS)
    path = os.pathsep.join(p for p in (hooks, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
                TOKENIZERS_PARALLELISM="false", PYTHONHASHSEED="0", PYTHONPATH=path,
                DPKIT_MUTATION_CHILD_HITS=str(work / CHILD_HITS / "hits.txt"))


def mutant_sources(work: Path, module: Module) -> dict[str, tuple[str, str]]:
    """Mutant name → (function, mutated line(s)) from mutmut's trampolined copy of the module."""
    tree = ast.parse((work / "mutants" / _scratch_path(module.path)).read_text())
    bodies: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            name = node.name
            node.name = "f"  # compare signatures (mutated defaults) and bodies, not names
            bodies[name] = ast.unparse(node)
    out = {}
    prefix = _module_name(module.path)
    for name, body in bodies.items():
        base, _, tag = name.rpartition("__mutmut_")
        if tag == "orig" or f"{base}__mutmut_orig" not in bodies:
            continue
        diff = [d[1:].strip() for d in difflib.ndiff(bodies[f"{base}__mutmut_orig"].splitlines(),
                                                     body.splitlines()) if d.startswith("+ ")]
        function = base.split("ǁ")[-1].removeprefix("x_").removeprefix("x")  # class methods: xǁClassǁname
        out[f"{prefix}.{name}"] = (function.strip("ǁ"), " / ".join(diff))
    return out


def _name_key(name: str) -> str:
    return name.replace("ǁ", ".")


def run_module(module: Module, equivalents: list[dict], timeout: float | None = None) -> Score:
    """Run mutmut on ``module`` (stopped after ``timeout`` seconds); classify every mutant run."""
    start = time.perf_counter()
    work = prepare(module)
    mutmut = [sys.executable, "-m", "mutmut"]
    prefix = _module_name(module.path)
    names = [pattern for f in sorted(module.only_functions or ())
             for pattern in (f"{prefix}.x_{f}__mutmut_*", f"{prefix}.xǁ*ǁ{f}__mutmut_*")]
    if module.only_mutants:
        names = list(module.only_mutants)
    cmd = ["nice", "-n", "10", *mutmut, "run", "--max-children", "1", *names]
    log = work / "mutmut.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=work, env=_env(work), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    results = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=_env(work),
                             capture_output=True, text=True).stdout
    score = Score(module.path, partial=proc.returncode is not None and proc.returncode < 0)
    sources = mutant_sources(work, module)
    for line in results.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if not sep or "__mutmut_" not in name:
            continue
        function, changed = sources.get(name, ("?", "?"))
        if status == "not checked" or (module.only_functions is not None
                                       and function not in module.only_functions):
            continue
        if module.only_mutants and not any(fnmatch.fnmatch(name, m) for m in module.only_mutants):
            continue
        score.statuses[name] = status
        if status in KILLED:
            continue
        reason = next((e["reason"] for e in equivalents
                       if e["function"] == function and e["line"].strip() == changed), None)
        if changed == "":  # e.g. 1e30 → 1e30 + 1, the same float: the same code once parsed
            reason = "no-op: the mutant parses to the same code as the original"
        if reason is not None:
            score.equivalent[name] = reason
        else:
            score.survivors[name] = f"{status}: {function}: {changed}"
    if proc.returncode != 0 and not score.statuses:
        if "could not find any test case for any mutant" in log.read_text():
            score.note = ("no mutant: mutmut does not mutate decorated functions (@property, "
                          "@torch.no_grad, @lru_cache, @staticmethod); the planted battery covers them")
        else:
            raise SystemExit(f"mutmut failed on {module.path}:\n{log.read_text()[-2000:]}")
    score.seconds = time.perf_counter() - start
    return score


def changed_functions(path: str, base: str) -> set[str] | None:
    """Names of the functions of ``path`` whose lines changed since ``base`` (None: file unchanged)."""
    diff = subprocess.run(["git", "diff", "-U0", base, "--", path], cwd=ROOT, capture_output=True,
                          text=True).stdout
    lines = [range(int(m.group(1)), int(m.group(1)) + int(m.group(2) or 1))
             for m in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M)]
    if not lines:
        return None
    tree = ast.parse((ROOT / path).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if any(set(span) & set(r) for r in lines):
                names.add(node.name)
    return names


def main(argv: list[str] | None = None) -> int:
    """Run the selected modules and print their scores; exit 1 on an unexplained survivor."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", help="files of tools/mutation.toml (default: all)")
    ap.add_argument("--changed-since", metavar="REF", help="only modules and functions changed since REF")
    ap.add_argument("--list", action="store_true", help="list the modules and their tests")
    ap.add_argument("--mutants", nargs="+", metavar="NAME",
                    help="only these mutants (names or globs, as a SURVIVED line prints them): "
                    "rerun the survivors of a run after adding tests")
    ap.add_argument("--ratchet", action="store_true",
                    help="fail only on survivors of modules marked `enforced = true` (CI): a "
                    "module is enforced once it reaches 100 %% killed-or-justified")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="stop after this long (CI); modules not reached are listed as not run")
    args = ap.parse_args(argv)
    modules = load_modules()
    if args.list:
        for m in modules:
            print(f"{m.path}\n    " + "\n    ".join(m.tests))
        return 0
    if args.modules:
        unknown = set(args.modules) - {m.path for m in modules}
        if unknown:
            raise SystemExit(f"not in {CONFIG.relative_to(ROOT)}: {sorted(unknown)}; add them there")
        modules = [m for m in modules if m.path in args.modules]
    if args.changed_since:
        selected = []
        for m in modules:
            functions = changed_functions(m.path, args.changed_since)
            if functions and m.only_functions is not None:
                functions &= m.only_functions
            if functions:
                m.only_functions = functions
                selected.append(m)
        modules = selected
        if not modules:
            print(f"mutation: no privacy-critical function changed since {args.changed_since}")
            return 0
    if args.mutants:
        for m in modules:
            m.only_mutants = args.mutants
    equivalents = load_equivalents()
    failed = False
    start = time.perf_counter()
    for m in modules:
        left = None if args.budget is None else args.budget - (time.perf_counter() - start)
        if left is not None and left < 30:
            print(f"mutation: {m.path} not run: the --budget of {args.budget:.0f} s is spent")
            continue
        what = ("functions " + ", ".join(sorted(m.only_functions)) if m.only_functions
                else "all functions")
        print(f"mutation: {m.path} ({what})", flush=True)
        score = run_module(m, equivalents.get(m.path, []), left)
        print(score.line(), flush=True)
        for name, what in score.survivors.items():
            print(f"    SURVIVED {name}  {what}")
        failed |= bool(score.survivors) and (m.enforced or not args.ratchet)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
