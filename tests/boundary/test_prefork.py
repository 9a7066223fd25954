"""The fork server computes once what each server would compute alike (dpkit.boundary.prefork)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_fork_server_finds_the_c_library_and_the_module_folders_once_for_its_servers():
    code = ("import dpkit.boundary.prefork\n"
            "from dpkit.boundary import confine\n"
            "import json, sys\n"
            "print(json.dumps([confine._libc.cache_info().currsize,"
            " len(confine._MODULE_ROOTS), len(sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found, remembered, modules = json.loads(out.stdout)
    assert found == 1 and remembered > 0.5 * modules
