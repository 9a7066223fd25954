"""Every printing command stops quietly when its reader goes away (``dpkit ... | head``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpkit.cli.main import COMMANDS

TOY = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
SPEC = """
name: pipe
data: {name: toy_text, params: {n_docs: 8}}
model: {name: toy_space}
defense: {name: toy_noise, params: {eta: 1.0}}
attacks: [{name: toy_attack}]
device: cpu
"""

# one printing invocation per command; a new command must be added here
INVOCATIONS = {
    "run": (["run", "{spec}", "--out", "{out}", "--no-progress"], TOY),
    "validate": (["validate", "{spec}"], TOY),
    "plugins": (["plugins", "--json"], {}),
    "budget": (["budget", "dpsgd", "--noise-multiplier", "1.0", "--steps", "3"], {}),
    "audit": (["audit", "laplace_dx", "--params", '{"eta": 5}', "--samples", "200"],
              {"DPKIT_LOAD_PLUGINS": "baselines"}),
    "data": (["data", "list"], {"DPKIT_LOAD_PLUGINS": "datasets,models"}),
    "new": (["new", "plugin", "pipe-demo", "--dir", "{out}"], {}),
    "report": (["report", "{run}"], TOY),
}


def test_every_command_has_an_invocation():
    assert set(INVOCATIONS) == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_closed_stdout_exits_quietly(command, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    args, env = INVOCATIONS[command]
    run_dir = tmp_path / "finished"
    if "{run}" in args:  # report needs a finished run to re-render
        subprocess.run([sys.executable, "-m", "dpkit.cli.main", "run", str(spec), "--out",
                        str(run_dir), "--no-progress"], env={**os.environ, **TOY}, cwd=tmp_path,
                       check=True, capture_output=True)
    argv = [a.replace("{spec}", str(spec)).replace("{out}", str(tmp_path / "out"))
            .replace("{run}", str(run_dir)) for a in args]
    proc = subprocess.Popen([sys.executable, "-m", "dpkit.cli.main", *argv],
                            env={**os.environ, **env}, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first line is printed
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141, err
