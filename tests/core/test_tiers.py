"""The smoke tier (`make test-smoke`, ``pytest --smoke``) collects exactly its paths, each of
them contributing tests, and the Makefile and README name it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke_paths() -> tuple[str, ...]:
    """``SMOKE`` as tests/conftest.py defines it (read, not imported: conftest is no module)."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", "") == "SMOKE" for t in n.targets))
    return tuple(ast.literal_eval(node.value))


def test_smoke_collects_its_paths_and_nothing_else():
    done = subprocess.run([sys.executable, "-m", "pytest", "--smoke", "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    paths = smoke_paths()
    assert ids and all(i.startswith(paths) for i in ids), [i for i in ids if not i.startswith(paths)]
    assert {p for p in paths if any(i.startswith(p) for i in ids)} == set(paths)


def test_the_tiers_are_in_the_makefile_and_the_readme():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "test-smoke:" in makefile and "--smoke" in makefile and "--hypothesis-profile=smoke" \
        in makefile
    for tier in ("make test-smoke", "make test-fast", "make test"):
        assert tier in readme
    assert "--lf" in readme and " -x" in readme
