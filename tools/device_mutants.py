"""The "CPU only" equivalent mutants, tried where they are not equivalent: on a CUDA machine.

tools/equivalent_mutants.toml lists mutants that change nothing on a CPU (``device=None`` is the
CPU there) but would on a GPU. Each such entry names the CUDA test that should kill it ("killed
on CUDA by test_x"). This tool checks that claim, and finds the entries that name no test:

    python tools/device_mutants.py export DIR   # here: each mutated file and a manifest
    python tools/device_mutants.py check DIR    # on a CUDA machine: each mutant against its test

``export`` regenerates the modules' mutants with mutmut (no test is run) and writes each matched
mutant as a whole mutated file. ``check`` runs each test unmutated first (it must pass, not skip),
then each mutant in a copy of the tree, several at once, and prints killed / survived / untested.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import (ROOT, load_equivalents, load_modules, mutant_sources,  # noqa: E402
                      prepare, _scratch_path)

CUDA_ONLY = re.compile(r"CUDA|cuda|CPU only")
CUDA_TOO = "equivalent on CUDA too"  # a reason judged after such a run: expected to survive
NAMED_TEST = re.compile(r"killed on CUDA by (?:the contract's )?(test_\w+)")
COPIED = ("dpkit", "plugins", "tests", "examples", "pyproject.toml")


def _mutated_file(work: Path, path: str, name: str) -> str:
    """The whole of ``path`` with mutant ``name`` put in place of its function."""
    import libcst as cst
    from mutmut.mutation.diff_apply import read_mutant_function
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    original = cst.parse_module((ROOT / path).read_text())
    mutants = cst.parse_module((work / "mutants" / _scratch_path(path)).read_text())
    function_name, class_name = orig_function_and_class_names_from_key(name)
    mutant = read_mutant_function(mutants, name.rpartition(".")[-1])
    function_name = function_name.rpartition(".")[-1]
    scopes = [original] if class_name is None else [
        c.body for c in original.body if isinstance(c, cst.ClassDef) and c.name.value == class_name]
    target = next((f for scope in scopes for f in scope.body
                   if isinstance(f, cst.FunctionDef) and f.name.value == function_name), None)
    assert target is not None, f"{class_name}.{function_name} not found in {path}"
    return original.deep_replace(target, mutant).code  # type: ignore[arg-type]


def export(folder: Path) -> list[dict]:
    """Write the mutated files of every CUDA-only equivalent, and ``manifest.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    equivalents = load_equivalents()
    entries: list[dict] = []
    for module in load_modules():
        wanted = [e for e in equivalents.get(module.path, []) if CUDA_ONLY.search(e["reason"])]
        if not wanted:
            continue
        work = prepare(module)
        made = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from mutmut.__main__ import create_file_mutants; "
                               "r = create_file_mutants(Path(sys.argv[1])); "
                               "sys.exit(repr(r.error) if r.error else 0)",
                               _scratch_path(module.path)], cwd=work, capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(f"mutmut could not mutate {module.path}:\n{made.stderr[-2000:]}")
        sources = mutant_sources(work, module)
        for entry in wanted:
            names = [n for n, (f, line) in sources.items()
                     if f == entry["function"] and line == entry["line"].strip()]
            test = NAMED_TEST.search(entry["reason"])
            for name in names:
                key = f"{len(entries):03d}"
                (folder / f"{key}.py").write_text(_mutated_file(work, module.path, name))
                entries.append({"key": key, "module": module.path, "mutant": name,
                                "function": entry["function"], "line": entry["line"],
                                "test": test.group(1) if test else None,
                                "cuda_equivalent": entry["reason"].startswith(CUDA_TOO),
                                "test_files": module.tests})
            if not names:
                print(f"no mutant matches {module.path}: {entry['function']}: {entry['line']}")
    (folder / "manifest.json").write_text(json.dumps(entries, indent=1))
    print(f"{len(entries)} mutants written to {folder}")
    return entries


def _environment(tree: Path) -> dict[str, str]:
    path = [str(tree), str(tree / "plugins"), str(tree / "examples" / "dpkit-example-plugin"),
            os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p),
                DPKIT_BUDGET_STORE="off", PYTHONHASHSEED="0")


def _pytest(tree: Path, entry: dict) -> tuple[int, str]:
    selector = entry["test"] or "cuda or device"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "-o", "addopts=", "--import-mode=importlib", "-p", "no:randomly",
                           "-k", selector, *dict.fromkeys(entry["test_files"])], cwd=tree, env=_environment(tree),
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout[-1500:] + done.stderr[-1500:]


def _outcome(rc: int, log: str, entry: dict) -> str:
    if rc == 5 or (rc == 0 and " passed" not in log):
        return "untested"  # nothing selected, or only skips: no CUDA test reaches this mutant
    if rc == 0:
        return "equivalent" if entry.get("cuda_equivalent") else "survived"
    return "killed"


def check(folder: Path, workers: int = 8) -> list[dict]:
    """Run each exported mutant against its CUDA test in its own copy of this tree."""
    entries = json.loads((folder / "manifest.json").read_text())
    scratch = Path(tempfile.mkdtemp(prefix="device-mutants-"))

    def copy_tree(name: str) -> Path:
        tree = scratch / name
        for part in COPIED:
            source = ROOT / part
            (shutil.copytree(source, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
             if source.is_dir() else shutil.copy(source, tree / part))
        return tree

    def baseline(entry: dict) -> str:
        rc, log = _pytest(copy_tree(f"base-{entry['key']}"), entry)
        return "passes" if rc == 0 and " passed" in log else f"rc {rc}: {log[-300:]}"

    def mutant(entry: dict) -> dict:
        tree = copy_tree(entry["key"])
        shutil.copy(folder / f"{entry['key']}.py", tree / entry["module"])
        rc, log = _pytest(tree, entry)
        return {**entry, "outcome": _outcome(rc, log, entry), "log": log[-600:]}

    with ThreadPoolExecutor(workers) as pool:
        firsts = {(e["test"], tuple(e["test_files"])): e for e in entries}
        unmutated = dict(zip(firsts, pool.map(baseline, firsts.values())))
        results = list(pool.map(mutant, entries))
    for result in results:
        result["unmutated"] = unmutated[result["test"], tuple(result["test_files"])]
        print(f"{result['outcome']:9s} {result['module']}: {result['function']}: "
              f"{result['line'][:70]}  [{result['test'] or 'no test named'}; unmutated: "
              f"{result['unmutated'][:40]}]")
    counts = {k: sum(r["outcome"] == k for r in results)
              for k in ("killed", "equivalent", "survived", "untested")}
    print(f"{len(results)} mutants: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    shutil.rmtree(scratch, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    """``export DIR`` or ``check DIR [--out FILE]``."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("export", "check"))
    ap.add_argument("folder", type=Path)
    ap.add_argument("--out", type=Path, help="check: write the results as JSON here")
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    if args.action == "export":
        export(args.folder)
        return 0
    results = check(args.folder, args.workers)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    wrong = [r for r in results
             if r["test"] and (r["unmutated"] != "passes" or r["outcome"] != "killed")]
    for r in wrong:  # a named CUDA test that fails unmutated, or does not kill its mutant
        print(f"WRONG CLAIM {r['module']}: {r['function']}: {r['line']} ({r['test']}: {r['outcome']}, "
              f"unmutated {r['unmutated'][:60]})")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
