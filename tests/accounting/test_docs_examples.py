"""Every example of docs/accounting.md runs: the ``pycon`` blocks as doctests (one namespace, in
order) and the ``console`` blocks as commands whose output must match (``...`` matches anything)."""

import doctest
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "accounting.md"
BLOCK = re.compile(r"^```(pycon|console)\n(.*?)^```$", re.S | re.M)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def blocks(kind: str) -> list[tuple[int, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 1, m.group(2)) for m in BLOCK.finditer(text)
            if m.group(1) == kind]


def test_the_python_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    globs: dict = {}
    found = blocks("pycon")
    assert len(found) >= 15
    for line, text in found:
        test = parser.get_doctest(text, globs, f"accounting.md:{line}", str(DOC), line)
        runner.run(test, out=sys.stdout.write, clear_globs=False)
        globs = test.globs
    assert runner.summarize(verbose=False).failed == 0


def commands(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], ""))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + line + "\n")
    return out


@pytest.mark.parametrize(("line", "text"), blocks("console"), ids=lambda v: str(v)[:12])
def test_the_command_examples_run_as_written(line, text):
    checker = doctest.OutputChecker()
    for command, want in commands(text):
        argv = shlex.split(command)
        assert argv[0] == "dpkit"
        done = subprocess.run([sys.executable, "-m", "dpkit", *argv[1:]], capture_output=True,
                              text=True, cwd=DOC.parents[1], timeout=600)
        assert done.returncode == 0, (command, done.stderr)
        assert checker.check_output(want, done.stdout, FLAGS), (
            f"docs/accounting.md:{line}: `{command}` printed\n{done.stdout}\nexpected\n{want}")
