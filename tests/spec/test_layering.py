"""The spec layer stands alone: loading and checking a spec never imports the runner."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import sys
from dpkit.contract.plugins import get_registry
from dpkit.spec import load_spec
spec = load_spec(sys.argv[1], registry=get_registry())
leaked = sorted(m for m in sys.modules if m.startswith("dpkit.runner"))
assert not leaked, leaked
print("ok")
"""


def test_loading_and_checking_a_spec_never_imports_the_runner(toy_spec_text):
    path, _ = toy_spec_text
    env = {**os.environ, "DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
    done = subprocess.run([sys.executable, "-c", CODE, str(path)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
