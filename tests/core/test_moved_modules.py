"""Old import paths of moved modules keep working for one release: same module object, a warning."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dpkit.base.compat import MOVED

CODE = """
import importlib, sys, warnings
import dpkit
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    moved = importlib.import_module(old)
assert moved is importlib.import_module(new), (moved, new)
assert moved.__spec__.name == new, moved.__spec__.name
assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)
parent, _, child = old.rpartition(".")
assert getattr(importlib.import_module(parent), child) is moved
print("ok")
"""


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_is_the_new_module(old):
    done = subprocess.run([sys.executable, "-c", CODE, old, MOVED[old]], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_from_import_of_an_old_path_gives_the_same_class():
    import dpkit
    from dpkit.context import RunContext  # the old path, on purpose
    from dpkit.wire import Release  # the old path, on purpose

    assert RunContext is dpkit.RunContext and Release is dpkit.Release
