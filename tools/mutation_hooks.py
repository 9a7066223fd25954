"""tools/mutation.py's hooks into mutmut's test runs: the stats of code that runs in a child
process (a cell's server, started by dpkit's ``forkserver``), and the fastest tests first.

mutmut records a trampoline hit in the process that makes it, and runs a mutant only against the
tests that hit its function; a function that only a server process calls would have no test, and
its mutants would count as "no tests". tools/mutation.py puts this file on ``PYTHONPATH`` of its
scratch copy twice over:

* as ``sitecustomize`` in every Python started with ``exec`` during mutmut's stats run (dpkit's
  fork server, whose children are the servers): :func:`install_in_child` opens the hits file
  before any of dpkit's code runs (a confined server keeps the descriptor: Landlock rules only
  what it opens later) and makes each trampoline hit append one line, the function's name;
* as a pytest plug-in (``-p mutation_hooks``) in the test process: before mutmut's own teardown
  hook files the hits under the test, :func:`pytest_runtest_teardown` adds the lines the children
  wrote during the test, then empties the file.

Outside the stats run both do nothing: a mutant's run selects its mutant in the children through
the same inherited ``MUTANT_UNDER_TEST``. In a mutant's run the plug-in orders its tests fastest
first (by the stats run's durations), so that a killed mutant fails in its quickest test.
"""

from __future__ import annotations

import os

import pluggy

VARIABLE = "DPKIT_MUTATION_CHILD_HITS"
hookimpl = pluggy.HookimplMarker("pytest")


def _recording() -> str | None:
    """The hits file, during mutmut's stats run only."""
    path = os.environ.get(VARIABLE)
    return path if path and os.environ.get("MUTANT_UNDER_TEST") == "stats" else None


def install_in_child() -> None:
    """In a freshly started Python of the stats run: append each trampoline hit to the file."""
    path = _recording()
    if path is None:
        return
    import mutmut.mutation.trampoline as trampoline

    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(name: str, caller: str | None = None) -> None:
        os.write(fd, f"{name}\n".encode())

    trampoline.record_trampoline_hit = record  # type: ignore[assignment]


@hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: object, nextitem: object) -> None:
    """Add the children's hits during this test to mutmut's, before mutmut files them."""
    path = _recording()
    if path is None or not os.path.exists(path):
        return
    from mutmut.state import state

    with open(path, "r+") as hits:
        names = {line.strip() for line in hits if line.strip()}
        hits.truncate(0)
    state()._stats.update(names)


@hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list) -> None:
    """In a mutant's run: its tests fastest first (stable: ties keep their order)."""
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    from mutmut.state import state

    seconds = state().duration_by_test
    items.sort(key=lambda item: seconds.get(item.nodeid, 0.0))
